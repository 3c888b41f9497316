"""The hand-written question/SQL items of the bundled finance corpus.

Each item is ``(q_id, English question, Chinese question or None, SQL)``. The SQL is written
the way BULL writes it: lower-case identifiers, Chinese literals for Chinese values, a
trailing ``;`` on many items, MySQL backticks on one and ``'now'`` (pinned when loading) on
two. ``generate.py`` checks every item before writing the corpus files.
"""

from __future__ import annotations

ITEMS: list[tuple[int, str, str | None, str]] = [
    (
        0,
        "List the abbreviations and security codes of companies listed on the STAR Market "
        "(科创板).",
        "列出在科创板上市的公司简称和证券代码",
        "select chinameabbr, secucode from lc_stockarchives where listedsector = '科创板';",
    ),
    (
        1,
        "Which companies are registered in Hangzhou? Give their full Chinese names and general "
        "managers.",
        "注册地在杭州市的公司有哪些？给出公司全称和总经理",
        "select chiname, generalmanager from lc_stockarchives where city = '杭州市';",
    ),
    (
        2,
        "Show the first-level industry of every listed company in Sichuan province.",
        None,
        "select a.chinameabbr, b.firstindustryname from lc_stockarchives as a join lc_exgindustry "
        "as b on a.companycode = b.companycode where a.state = '四川省'",
    ),
    (
        3,
        "How many listed companies are there in each first-level industry?",
        "每个一级行业各有多少家上市公司？",
        "select firstindustryname, count(*) from lc_exgindustry group by firstindustryname;",
    ),
    (
        4,
        "Which provinces have at least 5 listed companies, and how many does each have?",
        "哪些省份的上市公司不少于5家？各有多少家",
        "select state, count(*) as num from lc_stockarchives group by state having count(*) >= 5",
    ),
    (
        5,
        "What are the top 5 stocks by closing price on 2022-12-30, and their closing prices?",
        "2022年12月30日收盘价最高的5只股票及其收盘价",
        "select a.chinameabbr, b.closeprice from qt_dailyquote as b join lc_stockarchives as a on "
        "a.innercode = b.innercode where b.tradingday = '2022-12-30' order by b.closeprice desc, "
        "a.secucode limit 5;",
    ),
    (
        6,
        "What was the total turnover value of 华拓电子 from 2022-12-26 to 2022-12-30?",
        "华拓电子在2022年12月26日至30日的成交金额合计是多少",
        "select sum(b.turnovervalue) from qt_dailyquote as b join lc_stockarchives as a on "
        "a.innercode = b.innercode where a.chinameabbr = '华拓电子' and b.tradingday between "
        "'2022-12-26' and '2022-12-30';",
    ),
    (
        7,
        "What is the average closing price, rounded to two decimals, of each bank stock over "
        "the last two weeks of 2022?",
        None,
        "select a.chinameabbr, round(avg(b.closeprice), 2) from qt_dailyquote as b join "
        "lc_stockarchives as a on a.innercode = b.innercode join lc_exgindustry as c on "
        "a.companycode = c.companycode where c.firstindustryname = '银行' group by a.chinameabbr",
    ),
    (
        8,
        "On which trading day did Huatuo Electronics reach its highest price in the last two "
        "weeks of 2022, and what was that price?",
        "华拓电子在2022年最后两周哪一天的最高价最高？最高价是多少",
        "select b.tradingday, b.highprice from qt_dailyquote as b join lc_stockarchives as a on "
        "a.innercode = b.innercode where a.engname = 'Huatuo Electronics Co., Ltd.' order by "
        "b.highprice desc, b.tradingday limit 1",
    ),
    (
        9,
        "Which companies paid a cash dividend of at least 8 RMB per 10 shares for fiscal year "
        "2021? Give the amounts, largest first.",
        "2021年度每10股派现不少于8元的公司有哪些？按派现金额从高到低列出",
        "select a.chinameabbr, d.cashdivirmb from lc_dividend as d join lc_stockarchives as a on "
        "a.companycode = d.companycode where d.enddate = '2021-12-31' and d.cashdivirmb >= 8 "
        "order by d.cashdivirmb desc, a.companycode;",
    ),
    (
        10,
        "Which companies did not distribute a dividend for fiscal year 2020?",
        "哪些公司2020年度没有分红",
        "select a.chinameabbr from lc_dividend as d join lc_stockarchives as a on "
        "a.companycode = d.companycode where d.enddate = '2020-12-31' and d.ifdividend = 0;",
    ),
    (
        11,
        "How many ChiNext (创业板) companies were listed after 2015?",
        None,
        "select count(*) from lc_stockarchives where listedsector = '创业板' and "
        "strftime('%Y', listeddate) > '2015'",
    ),
    (
        12,
        "Which companies had an ex-dividend date in June 2022, and on which day?",
        "哪些公司的除权除息日在2022年6月？分别是哪一天",
        "select a.chinameabbr, d.exdividate from lc_dividend as d join lc_stockarchives as a on "
        "a.companycode = d.companycode where d.exdividate like '2022-06%' order by d.exdividate, "
        "a.companycode;",
    ),
    (
        13,
        "List the bond funds managed by 恒远基金.",
        "恒远基金管理的债券型基金有哪些",
        "select a.secuabbr from mf_fundarchives as a join mf_investadvisoroutline as b on "
        "a.investadvisorcode = b.investadvisorcode where b.investadvisorabbrname = '恒远基金' and "
        "a.fundtype = '债券型';",
    ),
    (
        14,
        "For each fund type, how many funds are there and what is their average management fee?",
        None,
        "select fundtype, count(*), avg(managementfee) from mf_fundarchives group by fundtype",
    ),
    (
        15,
        "Which three fund companies have the largest total size at establishment of their "
        "funds? Give the totals.",
        "旗下基金设立规模合计最大的三家基金公司及其合计规模",
        "select b.investadvisorname, round(sum(a.foundedsize), 2) as total from mf_fundarchives "
        "as a join mf_investadvisoroutline as b on a.investadvisorcode = b.investadvisorcode "
        "group by b.investadvisorname order by total desc, b.investadvisorname limit 3;",
    ),
    (
        16,
        "What was the unit net value of 恒远成长混合A at the end of November 2022?",
        "恒远成长混合A在2022年11月底的单位净值是多少",
        "select b.unitnv from mf_fundarchives as a join mf_netvalue as b on "
        "a.innercode = b.innercode where a.secuabbr = '恒远成长混合A' and b.enddate = "
        "'2022-11-30';",
    ),
    (
        17,
        "Which fund had the highest net value growth rate in December 2022, and what was it?",
        None,
        "select a.secuabbr, b.nvgrowthrate from mf_netvalue as b join mf_fundarchives as a on "
        "a.innercode = b.innercode where b.enddate = '2022-12-31' order by b.nvgrowthrate desc, "
        "a.innercode limit 1",
    ),
    (
        18,
        "Which stock funds were larger at establishment than the average of all funds?",
        "哪些股票型基金的设立规模高于全部基金的平均水平",
        "select secuabbr, foundedsize from mf_fundarchives where fundtype = '股票型' and "
        "foundedsize > (select avg(foundedsize) from mf_fundarchives);",
    ),
    (
        19,
        "List the fund managers with a doctoral degree and the funds they currently manage.",
        "列出最高学历为博士的基金经理及其现任管理的基金",
        "select b.chinesename, c.secuabbr from mf_fundmanagernew as a join mf_personalinfo as b "
        "on a.personalcode = b.personalcode join mf_fundarchives as c on "
        "a.innercode = c.innercode where b.education = '博士' and a.incumbent = 1",
    ),
    (
        20,
        "Which fund managers have left a fund they managed?",
        None,
        "select distinct b.chinesename from mf_fundmanagernew as a join mf_personalinfo as b on "
        "a.personalcode = b.personalcode where a.dimissiondate is not null;",
    ),
    (
        21,
        "Which fund managers currently manage more than one fund, and how many?",
        "目前管理不止一只基金的基金经理有哪些？各管理几只",
        "select b.chinesename, count(*) from mf_fundmanagernew as a join mf_personalinfo as b on "
        "a.personalcode = b.personalcode where a.incumbent = 1 group by b.chinesename "
        "having count(*) > 1",
    ),
    (
        22,
        "For how many years has each Shanghai fund company existed as of this year?",
        None,
        "select investadvisorabbrname, cast(strftime('%Y', 'now') as integer) - "
        "cast(strftime('%Y', establishmentdate) as integer) from mf_investadvisoroutline where "
        "city = '上海市';",
    ),
    (
        23,
        "Which funds were established within the last six years, in order of establishment?",
        "近六年成立的基金有哪些？按成立日期排序",
        "select secuabbr, establishmentdate from mf_fundarchives where establishmentdate >= "
        "date('now', '-6 years') order by establishmentdate, innercode;",
    ),
    (
        24,
        "Which funds have a fixed expiry date, and when do they expire?",
        None,
        "select secuabbr, expiredate from mf_fundarchives where expiredate is not null",
    ),
    (
        25,
        "What was China's year-on-year GDP growth in each quarter of 2020?",
        "2020年各季度全国GDP同比增速是多少",
        "select enddate, gdpyoy from ed_gdp where region = '全国' and enddate like '2020%' "
        "order by enddate;",
    ),
    (
        26,
        "In which year between 2017 and 2022 did national GDP grow fastest, and by how much?",
        None,
        "select strftime('%Y', enddate) as year, gdpyoy from ed_gdp where region = '全国' and "
        "enddate like '%-12-31' order by gdpyoy desc, enddate limit 1",
    ),
    (
        27,
        "Rank the provinces by GDP in 2022.",
        "按2022年GDP对各省份排名",
        "select region, gdp from ed_gdp where region != '全国' and enddate = '2022-12-31' "
        "order by gdp desc, region;",
    ),
    (
        28,
        "What share of national GDP, in percent with two decimals, did the tertiary industry "
        "account for in 2022?",
        None,
        "select round(tertiaryindustry * 100.0 / gdp, 2) from ed_gdp where region = '全国' and "
        "enddate = '2022-12-31'",
    ),
    (
        29,
        "In which months of 2022 was CPI year-on-year above 2%?",
        "2022年哪些月份CPI同比超过2%",
        "select enddate, cpiyoy from ed_cpi where enddate between '2022-01-01' and '2022-12-31' "
        "and cpiyoy > 2 order by enddate;",
    ),
    (
        30,
        "What was the average year-on-year CPI change in each year, rounded to two decimals?",
        None,
        "select strftime('%Y', enddate) as year, round(avg(cpiyoy), 2) from ed_cpi group by "
        "year order by year",
    ),
    (
        31,
        "What is the registered capital of Jinlan Securities?",
        "金澜证券的注册资本是多少",
        "select `RegCapital` from `lc_stockarchives` where `EngName` = "
        "'Jinlan Securities Co., Ltd.';",
    ),
    (
        32,
        "For each province, what is the total number of employees of its listed companies, "
        "from largest to smallest?",
        None,
        "select state, sum(employees) from lc_stockarchives group by state order by "
        "sum(employees) desc, state",
    ),
    (
        33,
        "How many different cities are fund management companies located in?",
        "基金管理公司分布在多少个不同的城市",
        "select count(distinct city) from mf_investadvisoroutline;",
    ),
    (
        34,
        "What were the daily closing prices of 泰和酒业 from 2022-12-26 to 2022-12-30?",
        None,
        "select b.tradingday, b.closeprice from qt_dailyquote as b join lc_stockarchives as a on "
        "a.innercode = b.innercode where a.chinameabbr = '泰和酒业' and b.tradingday >= "
        "'2022-12-26' order by b.tradingday",
    ),
    (
        35,
        "Which stock gained the most in percent on 2022-12-23, and by how much (two decimals)?",
        "2022年12月23日涨幅最大的股票是哪只？涨幅是多少",
        "select a.chinameabbr, round((b.closeprice - b.prevcloseprice) * 100.0 / "
        "b.prevcloseprice, 2) as pct from qt_dailyquote as b join lc_stockarchives as a on "
        "a.innercode = b.innercode where b.tradingday = '2022-12-23' order by pct desc, "
        "a.companycode limit 1;",
    ),
    (
        36,
        "When was the industry classification of 启明软件 published?",
        None,
        "select b.infopubldate from lc_exgindustry as b join lc_stockarchives as a on "
        "a.companycode = b.companycode where a.chinameabbr = '启明软件'",
    ),
    (
        37,
        "Who is the current manager of 金澜现金宝货币A, and for how many days had they held "
        "the post by the end of 2022?",
        "金澜现金宝货币A的现任基金经理是谁？截至2022年底任职了多少天",
        "select b.chinesename, cast(julianday('2022-12-31') - julianday(a.accessiondate) as "
        "integer) from mf_fundmanagernew as a join mf_personalinfo as b on "
        "a.personalcode = b.personalcode join mf_fundarchives as c on a.innercode = c.innercode "
        "where c.secuabbr = '金澜现金宝货币A' and a.incumbent = 1;",
    ),
]
