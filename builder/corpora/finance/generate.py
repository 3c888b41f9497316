"""Generate the bundled BULL-style finance corpus (``ccks_fin``).

Run ``python -m builder.corpora.finance.generate`` to rewrite ``ccks_fin.sql``,
``db_info.json``, ``items_en.json`` and ``items_cn.json`` beside this file. The data is
invented: company, fund and person names are made up, and the numbers come from a seeded
generator, so the output is identical on every run.
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from builder.corpora._gen import Table, check_items, render_script, write_text
from builder.dialect import DialectOptions, normalize_sql
from builder.tables import Row

HERE = Path(__file__).resolve().parent
DB_NAME = "ccks_fin"
SEED = 20240611

# abbr, English name, province, city, first industry, second industry, board
COMPANIES: list[tuple[str, str, str, str, str, str, str]] = [
    ("恒远银行", "Hengyuan Bank", "浙江省", "杭州市", "银行", "城商行", "主板"),
    ("金澜证券", "Jinlan Securities", "上海市", "上海市", "非银金融", "证券", "主板"),
    ("华拓电子", "Huatuo Electronics", "广东省", "深圳市", "电子", "半导体", "创业板"),
    ("嘉禾医药", "Jiahe Pharmaceutical", "江苏省", "苏州市", "医药生物", "化学制药", "主板"),
    ("鼎盛地产", "Dingsheng Real Estate", "广东省", "广州市", "房地产", "房地产开发", "主板"),
    ("润泽食品", "Runze Foods", "四川省", "成都市", "食品饮料", "食品加工", "主板"),
    ("启明软件", "Qiming Software", "北京市", "北京市", "计算机", "软件开发", "科创板"),
    ("沃德汽车", "Wode Auto", "湖北省", "武汉市", "汽车", "汽车零部件", "主板"),
    ("星河传媒", "Xinghe Media", "浙江省", "杭州市", "传媒", "影视院线", "创业板"),
    ("中岳化工", "Zhongyue Chemical", "山东省", "济南市", "基础化工", "化学原料", "主板"),
    ("远航新能", "Yuanhang New Energy", "江苏省", "无锡市", "电力设备", "光伏设备", "创业板"),
    ("凯晟机械", "Kaisheng Machinery", "浙江省", "宁波市", "机械设备", "通用设备", "主板"),
    ("佳联通信", "Jialian Communications", "广东省", "深圳市", "通信", "通信设备", "主板"),
    ("宏瀚生物", "Honghan Biotech", "上海市", "上海市", "医药生物", "生物制品", "科创板"),
    ("博瀚材料", "Bohan Materials", "福建省", "厦门市", "基础化工", "塑料", "主板"),
    ("泰和酒业", "Taihe Liquor", "四川省", "宜宾市", "食品饮料", "白酒", "主板"),
    ("衡信证券", "Hengxin Securities", "北京市", "北京市", "非银金融", "证券", "主板"),
    ("云帆科技", "Yunfan Technology", "浙江省", "杭州市", "计算机", "IT服务", "创业板"),
    ("铭泰电子", "Mingtai Electronics", "江苏省", "南京市", "电子", "消费电子", "主板"),
    ("安澜银行", "Anlan Bank", "江苏省", "南京市", "银行", "城商行", "主板"),
    ("青禾医疗", "Qinghe Medical", "北京市", "北京市", "医药生物", "医疗器械", "科创板"),
    ("蓝湾地产", "Lanwan Real Estate", "福建省", "福州市", "房地产", "房地产开发", "主板"),
    ("东禾食品", "Donghe Foods", "山东省", "青岛市", "食品饮料", "食品加工", "主板"),
    ("拓源汽车", "Tuoyuan Auto", "广东省", "广州市", "汽车", "乘用车", "主板"),
    ("辰芯半导体", "Chenxin Semiconductor", "上海市", "上海市", "电子", "半导体", "科创板"),
    ("华溪光伏", "Huaxi Photovoltaic", "浙江省", "嘉兴市", "电力设备", "光伏设备", "主板"),
    ("瀚海保险", "Hanhai Insurance", "广东省", "深圳市", "非银金融", "保险", "主板"),
    ("景川机械", "Jingchuan Machinery", "湖北省", "武汉市", "机械设备", "工程机械", "主板"),
    ("松石传媒", "Songshi Media", "北京市", "北京市", "传媒", "出版", "主板"),
    ("长宁化工", "Changning Chemical", "四川省", "成都市", "基础化工", "化学原料", "主板"),
    ("明澈软件", "Mingche Software", "福建省", "厦门市", "计算机", "软件开发", "创业板"),
    ("瑞霖生物", "Ruilin Biotech", "江苏省", "苏州市", "医药生物", "生物制品", "创业板"),
    ("峰岚通信", "Fenglan Communications", "湖北省", "武汉市", "通信", "通信设备", "主板"),
    ("朗驰储能", "Langchi Energy Storage", "广东省", "深圳市", "电力设备", "电池", "创业板"),
    ("鹭岛银行", "Ludao Bank", "福建省", "厦门市", "银行", "城商行", "主板"),
    ("新澄食品", "Xincheng Foods", "江苏省", "无锡市", "食品饮料", "饮料乳品", "主板"),
]

MANAGER_NAMES = [  # name, gender
    ("张伟明", "男"),
    ("李晓峰", "男"),
    ("王芳华", "女"),
    ("刘建国", "男"),
    ("陈思远", "男"),
    ("杨雪梅", "女"),
    ("赵志强", "男"),
    ("黄丽娜", "女"),
    ("周文博", "男"),
    ("吴海燕", "女"),
    ("徐天宇", "男"),
    ("孙佳怡", "女"),
    ("马俊杰", "男"),
    ("朱晓东", "男"),
    ("胡静怡", "女"),
    ("郭子豪", "男"),
    ("何雨欣", "女"),
    ("林志远", "男"),
    ("罗晓婷", "女"),
    ("高明辉", "男"),
    ("梁振宇", "男"),
    ("宋雅琴", "女"),
    ("郑浩然", "男"),
    ("谢婉清", "女"),
    ("韩东升", "男"),
    ("唐诗涵", "女"),
    ("冯家豪", "男"),
    ("董若曦", "女"),
    ("程鹏飞", "男"),
    ("曹欣然", "女"),
]

FUND_COMPANIES = [  # abbr, city, founded
    ("恒远基金", "杭州市", "2003-06-18"),
    ("金澜基金", "上海市", "2001-09-25"),
    ("博裕基金", "北京市", "2008-03-12"),
    ("中岳基金", "深圳市", "2005-11-08"),
    ("禾信基金", "广州市", "2012-07-20"),
    ("远景基金", "上海市", "2010-04-16"),
    ("九章基金", "北京市", "2015-01-29"),
    ("澄明基金", "深圳市", "2006-08-03"),
    ("泓川基金", "上海市", "2013-10-22"),
    ("银杉基金", "杭州市", "2017-05-09"),
]

# theme, fund type, investment type, suffix, orientation
FUND_KINDS = [
    ("成长", "混合型", "成长型", "混合A", "精选具有持续成长能力的上市公司"),
    ("价值精选", "股票型", "价值型", "股票", "投资被低估的优质蓝筹股"),
    ("稳健收益", "债券型", "稳健型", "债券A", "以信用债和利率债为主的固定收益投资"),
    ("现金宝", "货币市场型", "稳健型", "货币A", "投资于短期货币市场工具"),
    ("沪深300", "指数型", "平衡型", "指数增强", "跟踪沪深300指数并力争超额收益"),
    ("新能源", "股票型", "成长型", "股票", "聚焦新能源产业链"),
    ("医疗健康", "混合型", "成长型", "混合", "投资医疗健康相关行业"),
    ("纯债", "债券型", "稳健型", "债券C", "投资于国债、金融债等纯债品种"),
]

MONTH_ENDS = ["2022-07-31", "2022-08-31", "2022-09-30", "2022-10-31", "2022-11-30", "2022-12-31"]


def _secu_code(i: int, board: str) -> str:
    if board == "创业板":
        return f"300{i + 101:03d}"
    if board == "科创板":
        return f"688{i + 201:03d}"
    return f"60{i + 1001:04d}" if i % 2 == 0 else f"00{i + 2001:04d}"


def _trading_days(start: date, end: date) -> list[str]:
    days, d = [], start
    while d <= end:
        if d.weekday() < 5:
            days.append(d.isoformat())
        d += timedelta(days=1)
    return days


def build_tables() -> list[Table]:
    """Every table of ``ccks_fin`` with its seeded rows."""
    rng = random.Random(SEED)
    tables: list[Table] = []

    # ---- stock side ----
    archives: list[Row] = []
    industry: list[Row] = []
    quotes: list[Row] = []
    dividends: list[Row] = []
    managers_gm = [
        "陈建华",
        "李国强",
        "王志宏",
        "赵明远",
        "刘海波",
        "孙立新",
        "周晓光",
        "吴俊峰",
        "郑国平",
        "钱文涛",
        "冯卫东",
        "许志军",
    ]
    advisor_gm = [
        "沈国华",
        "蒋立新",
        "韦志刚",
        "秦明哲",
        "许文静",
        "邓建平",
        "彭晓梅",
        "苏振华",
        "卢海涛",
        "蔡文杰",
    ]
    days = _trading_days(date(2022, 12, 19), date(2022, 12, 30))
    for i, (abbr, eng, prov, city, ind1, ind2, board) in enumerate(COMPANIES):
        code = 1001 + i
        inner = 3001 + i
        suffix = "股份有限公司"
        listed = date(2004 + (i * 7) % 18, 1 + (i * 5) % 12, 1 + (i * 11) % 27).isoformat()
        reg_cap = round(rng.uniform(30000, 800000), 2)
        employees = rng.randrange(800, 42000)
        gm = managers_gm[i % len(managers_gm)]
        archives.append(
            (
                code,
                inner,
                _secu_code(i, board),
                abbr + suffix,
                abbr,
                eng + " Co., Ltd.",
                prov,
                city,
                listed,
                board,
                reg_cap,
                gm,
                employees,
            )
        )
        publ = f"{2019 + i % 4}-0{1 + i % 9}-{10 + i % 18:02d} 00:00:00"
        industry.append((i + 1, code, "申万行业分类", ind1, ind2, publ, 1))
        price = round(rng.uniform(4, 180), 2)
        prev = price
        for day in days:
            change = rng.gauss(0, 0.018)
            open_p = round(prev * (1 + rng.gauss(0, 0.006)), 2)
            close = round(max(1.0, prev * (1 + change)), 2)
            high = round(max(open_p, close) * (1 + abs(rng.gauss(0, 0.008))), 2)
            low = round(min(open_p, close) * (1 - abs(rng.gauss(0, 0.008))), 2)
            volume = rng.randrange(300_000, 60_000_000)
            value = round(volume * (open_p + close) / 2, 2)
            quotes.append(
                (len(quotes) + 1, inner, day, prev, open_p, high, low, close, volume, value)
            )
            prev = close
        for year in (2019, 2020, 2021):
            pays = rng.random() > 0.2
            cash = (
                round(rng.choice([0.5, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.2]) * (1 + (i % 3)), 2)
                if pays
                else None
            )
            bonus = rng.choice([None, None, None, 2.0, 3.0]) if pays else None
            ex_date = (
                f"{year + 1}-0{5 + (i + year) % 3}-{10 + (i * 3 + year) % 18:02d}" if pays else None
            )
            event = "实施方案" if pays else "不分配"
            dividends.append(
                (
                    len(dividends) + 1,
                    code,
                    f"{year}-12-31",
                    cash,
                    bonus,
                    ex_date,
                    1 if pays else 0,
                    event,
                )
            )

    tables.append(
        Table(
            name="lc_stockarchives",
            ddl="""CREATE TABLE lc_stockarchives (
    CompanyCode INTEGER PRIMARY KEY,
    InnerCode INTEGER NOT NULL UNIQUE,
    SecuCode TEXT NOT NULL,
    ChiName TEXT NOT NULL,
    ChiNameAbbr TEXT NOT NULL,
    EngName TEXT,
    State TEXT,
    City TEXT,
    ListedDate TEXT,
    ListedSector TEXT,
    RegCapital REAL,
    GeneralManager TEXT,
    Employees INTEGER
)""",
            columns=(
                "CompanyCode",
                "InnerCode",
                "SecuCode",
                "ChiName",
                "ChiNameAbbr",
                "EngName",
                "State",
                "City",
                "ListedDate",
                "ListedSector",
                "RegCapital",
                "GeneralManager",
                "Employees",
            ),
            rows=archives,
        )
    )
    tables.append(
        Table(
            name="lc_exgindustry",
            ddl="""CREATE TABLE lc_exgindustry (
    ID INTEGER PRIMARY KEY,
    CompanyCode INTEGER NOT NULL REFERENCES lc_stockarchives(CompanyCode),
    Standard TEXT,
    FirstIndustryName TEXT,
    SecondIndustryName TEXT,
    InfoPublDate TEXT,
    IfPerformed INTEGER
)""",
            columns=(
                "ID",
                "CompanyCode",
                "Standard",
                "FirstIndustryName",
                "SecondIndustryName",
                "InfoPublDate",
                "IfPerformed",
            ),
            rows=industry,
        )
    )
    tables.append(
        Table(
            name="qt_dailyquote",
            ddl="""CREATE TABLE qt_dailyquote (
    ID INTEGER PRIMARY KEY,
    InnerCode INTEGER NOT NULL REFERENCES lc_stockarchives(InnerCode),
    TradingDay TEXT NOT NULL,
    PrevClosePrice REAL,
    OpenPrice REAL,
    HighPrice REAL,
    LowPrice REAL,
    ClosePrice REAL,
    TurnoverVolume INTEGER,
    TurnoverValue REAL
)""",
            columns=(
                "ID",
                "InnerCode",
                "TradingDay",
                "PrevClosePrice",
                "OpenPrice",
                "HighPrice",
                "LowPrice",
                "ClosePrice",
                "TurnoverVolume",
                "TurnoverValue",
            ),
            rows=quotes,
        )
    )
    tables.append(
        Table(
            name="lc_dividend",
            ddl="""CREATE TABLE lc_dividend (
    ID INTEGER PRIMARY KEY,
    CompanyCode INTEGER NOT NULL REFERENCES lc_stockarchives(CompanyCode),
    EndDate TEXT NOT NULL,
    CashDiviRMB REAL,
    BonusShareRatio REAL,
    ExDiviDate TEXT,
    IfDividend INTEGER,
    EventProcedure TEXT
)""",
            columns=(
                "ID",
                "CompanyCode",
                "EndDate",
                "CashDiviRMB",
                "BonusShareRatio",
                "ExDiviDate",
                "IfDividend",
                "EventProcedure",
            ),
            rows=dividends,
        )
    )

    # ---- fund side ----
    advisors: list[Row] = []
    for i, (abbr, city, founded) in enumerate(FUND_COMPANIES):
        advisors.append(
            (
                101 + i,
                abbr + "管理有限公司",
                abbr,
                founded,
                round(rng.choice([1.0, 1.2, 1.5, 2.0, 2.5, 3.0]), 1),
                city,
                advisor_gm[i],
            )
        )
    persons: list[Row] = []
    for i, (name, gender) in enumerate(MANAGER_NAMES):
        edu = ("硕士", "硕士", "博士", "本科", "硕士")[i % 5]
        persons.append(
            (
                5001 + i,
                name,
                gender,
                1972 + (i * 7) % 20,
                edu,
                f"{2005 + (i * 3) % 14}-0{1 + i % 9}-01",
                101 + i % 10,
            )
        )
    funds: list[Row] = []
    netvalues: list[Row] = []
    fund_managers: list[Row] = []
    for i in range(40):
        company = FUND_COMPANIES[i % 10][0].removesuffix("基金")
        theme, ftype, itype, suffix, orientation = FUND_KINDS[(i * 3 + i // 10) % 8]
        abbr = f"{company}{theme}{suffix}"
        inner = 7001 + i
        established = date(2012 + (i * 5) % 10, 1 + (i * 7) % 12, 1 + (i * 13) % 28).isoformat()
        size = round(rng.uniform(2, 80), 2)
        fee = {"股票型": 1.5, "混合型": 1.2, "债券型": 0.6, "货币市场型": 0.3, "指数型": 0.8}[ftype]
        manager_idx = (i * 11) % 30
        expire = "2024-06-30" if i in (7, 23) else None
        funds.append(
            (
                inner,
                f"{(i * 37 + 1000) % 1000000:06d}",
                abbr,
                ftype,
                itype,
                101 + i % 10,
                established,
                size,
                MANAGER_NAMES[manager_idx][0],
                orientation,
                fee,
                expire,
            )
        )
        fund_managers.append(
            (
                len(fund_managers) + 1,
                inner,
                5001 + manager_idx,
                "基金经理",
                f"{2019 + i % 3}-0{1 + i % 9}-15",
                None,
                1,
            )
        )
        if i % 3 == 0:
            former = (manager_idx + 7) % 30
            fund_managers.append(
                (
                    len(fund_managers) + 1,
                    inner,
                    5001 + former,
                    "基金经理",
                    established,
                    f"{2019 + i % 3}-0{1 + i % 9}-14",
                    2,
                )
            )
        nv = 1.0 if ftype == "货币市场型" else round(rng.uniform(0.7, 3.2), 4)
        acc = round(nv + rng.uniform(0, 1.5), 4) if ftype != "货币市场型" else 1.0
        for month_end in MONTH_ENDS:
            if ftype != "货币市场型":
                step = rng.gauss(0.002, 0.035 if ftype in ("股票型", "指数型") else 0.01)
                new_nv = round(nv * (1 + step), 4)
                acc = round(acc + (new_nv - nv), 4)
                growth = round((new_nv / nv - 1) * 100, 4)
                nv = new_nv
            else:
                growth = 0.0
            netvalues.append((len(netvalues) + 1, inner, month_end, nv, acc, growth))

    tables.append(
        Table(
            name="mf_investadvisoroutline",
            ddl="""CREATE TABLE mf_investadvisoroutline (
    InvestAdvisorCode INTEGER PRIMARY KEY,
    InvestAdvisorName TEXT NOT NULL,
    InvestAdvisorAbbrName TEXT NOT NULL,
    EstablishmentDate TEXT,
    RegCapital REAL,
    City TEXT,
    GeneralManager TEXT
)""",
            columns=(
                "InvestAdvisorCode",
                "InvestAdvisorName",
                "InvestAdvisorAbbrName",
                "EstablishmentDate",
                "RegCapital",
                "City",
                "GeneralManager",
            ),
            rows=advisors,
        )
    )
    tables.append(
        Table(
            name="mf_fundarchives",
            ddl="""CREATE TABLE mf_fundarchives (
    InnerCode INTEGER PRIMARY KEY,
    SecuCode TEXT NOT NULL,
    SecuAbbr TEXT NOT NULL,
    FundType TEXT,
    InvestmentType TEXT,
    InvestAdvisorCode INTEGER REFERENCES mf_investadvisoroutline(InvestAdvisorCode),
    EstablishmentDate TEXT,
    FoundedSize REAL,
    Manager TEXT,
    InvestOrientation TEXT,
    ManagementFee REAL,
    ExpireDate TEXT
)""",
            columns=(
                "InnerCode",
                "SecuCode",
                "SecuAbbr",
                "FundType",
                "InvestmentType",
                "InvestAdvisorCode",
                "EstablishmentDate",
                "FoundedSize",
                "Manager",
                "InvestOrientation",
                "ManagementFee",
                "ExpireDate",
            ),
            rows=funds,
        )
    )
    tables.append(
        Table(
            name="mf_netvalue",
            ddl="""CREATE TABLE mf_netvalue (
    ID INTEGER PRIMARY KEY,
    InnerCode INTEGER NOT NULL REFERENCES mf_fundarchives(InnerCode),
    EndDate TEXT NOT NULL,
    UnitNV REAL,
    AccumulatedUnitNV REAL,
    NVGrowthRate REAL
)""",
            columns=("ID", "InnerCode", "EndDate", "UnitNV", "AccumulatedUnitNV", "NVGrowthRate"),
            rows=netvalues,
        )
    )
    tables.append(
        Table(
            name="mf_personalinfo",
            ddl="""CREATE TABLE mf_personalinfo (
    PersonalCode INTEGER PRIMARY KEY,
    ChineseName TEXT NOT NULL,
    Gender TEXT,
    BirthYear INTEGER,
    Education TEXT,
    PracticeDate TEXT,
    InvestAdvisorCode INTEGER REFERENCES mf_investadvisoroutline(InvestAdvisorCode)
)""",
            columns=(
                "PersonalCode",
                "ChineseName",
                "Gender",
                "BirthYear",
                "Education",
                "PracticeDate",
                "InvestAdvisorCode",
            ),
            rows=persons,
        )
    )
    tables.append(
        Table(
            name="mf_fundmanagernew",
            ddl="""CREATE TABLE mf_fundmanagernew (
    ID INTEGER PRIMARY KEY,
    InnerCode INTEGER NOT NULL REFERENCES mf_fundarchives(InnerCode),
    PersonalCode INTEGER NOT NULL REFERENCES mf_personalinfo(PersonalCode),
    PostName TEXT,
    AccessionDate TEXT,
    DimissionDate TEXT,
    Incumbent INTEGER
)""",
            columns=(
                "ID",
                "InnerCode",
                "PersonalCode",
                "PostName",
                "AccessionDate",
                "DimissionDate",
                "Incumbent",
            ),
            rows=fund_managers,
        )
    )

    # ---- macro side ----
    gdp: list[Row] = []
    annual = {
        2017: 832036.0,
        2018: 919281.0,
        2019: 986515.0,
        2020: 1013567.0,
        2021: 1143670.0,
        2022: 1210207.0,
    }
    yoy = {
        2017: [6.9, 6.9, 6.8, 6.9],
        2018: [6.8, 6.8, 6.7, 6.7],
        2019: [6.4, 6.3, 6.2, 6.1],
        2020: [-6.8, -1.6, 0.7, 2.3],
        2021: [18.3, 12.7, 9.8, 8.4],
        2022: [4.8, 2.5, 3.0, 3.0],
    }
    shares = (0.22, 0.47, 0.73, 1.0)
    for year, total in annual.items():
        for q in range(4):
            cum = round(total * shares[q] * rng.uniform(0.995, 1.005), 1)
            if q == 3:
                cum = total
            primary = round(cum * rng.uniform(0.06, 0.08), 1)
            secondary = round(cum * rng.uniform(0.37, 0.40), 1)
            tertiary = round(cum - primary - secondary, 1)
            end = ("03-31", "06-30", "09-30", "12-31")[q]
            gdp.append(
                (
                    len(gdp) + 1,
                    f"{year}-{end}",
                    "全国",
                    cum,
                    yoy[year][q],
                    primary,
                    secondary,
                    tertiary,
                )
            )
    provinces = {
        "广东省": 97277.8,
        "江苏省": 92595.4,
        "山东省": 76469.7,
        "浙江省": 58002.8,
        "四川省": 40678.1,
        "湖北省": 39366.6,
    }
    for prov, base in provinces.items():
        value = base
        for year in range(2018, 2023):
            growth = round(rng.uniform(4.0, 8.5) if year != 2020 else rng.uniform(-5.0, 3.9), 1)
            if year > 2018:
                value = round(value * (1 + growth / 100) * rng.uniform(1.0, 1.03), 1)
            primary = round(value * rng.uniform(0.04, 0.11), 1)
            secondary = round(value * rng.uniform(0.35, 0.45), 1)
            gdp.append(
                (
                    len(gdp) + 1,
                    f"{year}-12-31",
                    prov,
                    value,
                    growth,
                    primary,
                    secondary,
                    round(value - primary - secondary, 1),
                )
            )
    cpi: list[Row] = []
    for year in (2020, 2021, 2022):
        for month in range(1, 13):
            end = (date(year + (month == 12), month % 12 + 1, 1) - timedelta(days=1)).isoformat()
            cpi.append(
                (
                    len(cpi) + 1,
                    end,
                    round(rng.uniform(-0.5, 3.2), 1),
                    round(rng.uniform(-0.6, 1.0), 1),
                    round(rng.uniform(-4.0, 9.0), 1),
                )
            )

    tables.append(
        Table(
            name="ed_gdp",
            ddl="""CREATE TABLE ed_gdp (
    ID INTEGER PRIMARY KEY,
    EndDate TEXT NOT NULL,
    Region TEXT NOT NULL,
    GDP REAL,
    GDPYoY REAL,
    PrimaryIndustry REAL,
    SecondaryIndustry REAL,
    TertiaryIndustry REAL
)""",
            columns=(
                "ID",
                "EndDate",
                "Region",
                "GDP",
                "GDPYoY",
                "PrimaryIndustry",
                "SecondaryIndustry",
                "TertiaryIndustry",
            ),
            rows=gdp,
        )
    )
    tables.append(
        Table(
            name="ed_cpi",
            ddl="""CREATE TABLE ed_cpi (
    ID INTEGER PRIMARY KEY,
    EndDate TEXT NOT NULL,
    CPIYoY REAL,
    CPIMoM REAL,
    FoodCPIYoY REAL
)""",
            columns=("ID", "EndDate", "CPIYoY", "CPIMoM", "FoodCPIYoY"),
            rows=cpi,
        )
    )
    return tables


# ---- db_info.json --------------------------------------------------------------------

TABLE_NAMES = {  # table: (English, Chinese)
    "lc_stockarchives": ("Company profile", "公司概况"),
    "lc_exgindustry": ("Company industry classification", "公司行业划分表"),
    "qt_dailyquote": ("Daily stock quotes", "日行情表"),
    "lc_dividend": ("Company dividend distribution", "公司分红"),
    "mf_investadvisoroutline": ("Fund management company overview", "基金管理人概况"),
    "mf_fundarchives": ("Fund profile", "公募基金概况"),
    "mf_netvalue": ("Fund net asset value", "公募基金净值"),
    "mf_personalinfo": ("Fund manager personal information", "基金经理个人信息"),
    "mf_fundmanagernew": ("Fund manager tenure", "公募基金经理（新）"),
    "ed_gdp": ("Gross domestic product", "国内生产总值"),
    "ed_cpi": ("Consumer price index", "居民消费价格指数"),
}

COLUMN_NAMES = {  # column: (English, Chinese)
    "CompanyCode": ("Company code", "公司代码"),
    "InnerCode": ("Inner code", "证券内部编码"),
    "SecuCode": ("Security code", "证券代码"),
    "ChiName": ("Chinese name", "中文名称"),
    "ChiNameAbbr": ("Chinese name abbreviation", "中文名称缩写"),
    "EngName": ("English name", "英文名称"),
    "State": ("Province", "省份"),
    "City": ("City", "城市"),
    "ListedDate": ("Listing date", "上市日期"),
    "ListedSector": ("Listing board", "上市板块"),
    "RegCapital": ("Registered capital", "注册资本"),
    "GeneralManager": ("General manager", "总经理"),
    "Employees": ("Employees", "员工总数"),
    "ID": ("Record identifier", "记录ID"),
    "Standard": ("Classification standard", "行业划分标准"),
    "FirstIndustryName": ("First-level industry", "一级行业名称"),
    "SecondIndustryName": ("Second-level industry", "二级行业名称"),
    "InfoPublDate": ("Information release date", "信息发布日期"),
    "IfPerformed": ("Whether in effect", "是否执行"),
    "TradingDay": ("Trading day", "交易日"),
    "PrevClosePrice": ("Previous close price", "昨收盘(元)"),
    "OpenPrice": ("Open price", "今开盘(元)"),
    "HighPrice": ("High price", "最高价(元)"),
    "LowPrice": ("Low price", "最低价(元)"),
    "ClosePrice": ("Close price", "收盘价(元)"),
    "TurnoverVolume": ("Turnover volume (shares)", "成交量(股)"),
    "TurnoverValue": ("Turnover value (RMB)", "成交金额(元)"),
    "EndDate": ("End date", "截止日期"),
    "CashDiviRMB": ("Cash dividend per 10 shares (RMB)", "派现(含税/人民币元)"),
    "BonusShareRatio": ("Bonus shares per 10 shares", "送股比例(10送X)"),
    "ExDiviDate": ("Ex-dividend date", "除权除息日"),
    "IfDividend": ("Whether paid", "是否分红"),
    "EventProcedure": ("Plan progress", "方案进度"),
    "InvestAdvisorCode": ("Fund manager company code", "基金管理人代码"),
    "InvestAdvisorName": ("Fund manager company name", "基金管理人名称"),
    "InvestAdvisorAbbrName": ("Fund manager company abbreviation", "基金管理人简称"),
    "EstablishmentDate": ("Establishment date", "成立日期"),
    "SecuAbbr": ("Security abbreviation", "证券简称"),
    "FundType": ("Fund type", "基金类型"),
    "InvestmentType": ("Investment type", "投资类型"),
    "FoundedSize": ("Size at establishment (100 million units)", "设立规模(亿份)"),
    "Manager": ("Fund manager", "基金经理"),
    "InvestOrientation": ("Investment direction", "投资方向"),
    "ManagementFee": ("Management fee (%)", "管理费率(%)"),
    "ExpireDate": ("Expiry date", "存续期截止日"),
    "UnitNV": ("Unit net value", "单位净值(元)"),
    "AccumulatedUnitNV": ("Accumulated unit net value", "累计单位净值(元)"),
    "NVGrowthRate": ("Net value growth rate (%)", "净值增长率(%)"),
    "PersonalCode": ("Person code", "人员代码"),
    "ChineseName": ("Chinese name", "中文名"),
    "Gender": ("Gender", "性别"),
    "BirthYear": ("Birth year", "出生年份"),
    "Education": ("Highest education", "最高学历"),
    "PracticeDate": ("Practice start date", "从业开始日期"),
    "PostName": ("Post", "职位名称"),
    "AccessionDate": ("Accession date", "到任日期"),
    "DimissionDate": ("Dimission date", "离职日期"),
    "Incumbent": ("Incumbent (1 yes, 2 no)", "在任与否"),
    "Region": ("Region", "地区"),
    "GDP": ("GDP (100 million RMB)", "国内生产总值(亿元)"),
    "GDPYoY": ("GDP year-on-year growth (%)", "国内生产总值同比增长(%)"),
    "PrimaryIndustry": ("Primary industry value added", "第一产业增加值(亿元)"),
    "SecondaryIndustry": ("Secondary industry value added", "第二产业增加值(亿元)"),
    "TertiaryIndustry": ("Tertiary industry value added", "第三产业增加值(亿元)"),
    "CPIYoY": ("CPI year-on-year (%)", "CPI同比(%)"),
    "CPIMoM": ("CPI month-on-month (%)", "CPI环比(%)"),
    "FoodCPIYoY": ("Food CPI year-on-year (%)", "食品CPI同比(%)"),
}


def db_info(tables: list[Table]) -> list[dict[str, Any]]:
    """BULL's ``db_info.json`` shape, with both English and Chinese names."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    column_info = []
    for table in tables:
        conn.execute(table.ddl)
        types = [r[2] for r in conn.execute(f"pragma table_info({table.name})")]
        column_info.append(
            {
                "table": table.name,
                "columns": ["*", *table.columns],
                "column_chiName": [None, *(COLUMN_NAMES[c][1] for c in table.columns)],
                "column_engName": [None, *(COLUMN_NAMES[c][0] for c in table.columns)],
                "columnType_sqlite3": [None, *(t.lower() for t in types)],
            }
        )
    return [
        {
            "db_name": DB_NAME,
            "table_name": [[t.name, TABLE_NAMES[t.name][0]] for t in tables],
            "table_chiName": [[t.name, TABLE_NAMES[t.name][1]] for t in tables],
            "column_info": column_info,
        }
    ]


def main() -> None:
    """Write the corpus files beside this script."""
    from builder.corpora.finance.items import ITEMS

    tables = build_tables()
    opts = DialectOptions()
    en = [
        {"q_id": q_id, "question": q_en, "db_name": DB_NAME, "sql_query": sql}
        for q_id, q_en, _q_zh, sql in ITEMS
    ]
    cn = [
        {"q_id": q_id, "question": q_zh, "db_name": DB_NAME, "sql_query": sql}
        for q_id, _q_en, q_zh, sql in ITEMS
        if q_zh
    ]
    results = check_items(
        tables, en, sql_key="sql_query", id_key="q_id", prepare=lambda s: normalize_sql(s, opts).sql
    )
    write_text(
        HERE / f"{DB_NAME}.sql",
        render_script("ccks_fin: an invented BULL-style financial database", tables),
    )
    write_text(
        HERE / "db_info.json", json.dumps(db_info(tables), ensure_ascii=False, indent=2) + "\n"
    )
    write_text(HERE / "items_en.json", json.dumps(en, ensure_ascii=False, indent=2) + "\n")
    write_text(HERE / "items_cn.json", json.dumps(cn, ensure_ascii=False, indent=2) + "\n")
    sizes = ", ".join(f"{t.name}={len(t.rows)}" for t in tables)
    print(f"wrote {len(tables)} tables ({sizes}); {len(en)} items, {len(cn)} in Chinese")
    for q_id, rows in results.items():
        print(f"  {q_id}: {len(rows)} rows, first {rows[0]}")


if __name__ == "__main__":
    main()
