"""The question/SQL items of the bundled clinical corpus, written in EHRSQL's style.

Items are templates in EHRSQL's manner (lower-case SQL, ``current_time``, ``strftime('%y',
...)``, ``dense_rank`` rankings); the patients, drugs and lab tests they name are picked from
the generated data by small queries, so every item has an answer. Two items are
unanswerable (``query == "nan"``), as EHRSQL marks questions a database cannot answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builder.corpora._gen import Table, build_db

Item = tuple[str, str, dict[str, Any], str]


def make_items(tables: Sequence[Table]) -> list[Item]:
    """Every clinical item as ``(question, query, value, q_tag)``."""
    conn = build_db(tables)

    def one(sql: str, *args: Any) -> Any:
        row = conn.execute(sql, args).fetchone()
        if row is None:
            raise AssertionError(f"no row for picking query: {sql}")
        return row[0] if len(row) == 1 else row

    current = [
        r[0]
        for r in conn.execute(
            "select subject_id from admissions where dischtime is null order by subject_id"
        )
    ]
    multi = [
        r[0]
        for r in conn.execute(
            "select subject_id from admissions where dischtime is not null group by subject_id "
            "having count(*) >= 2 order by subject_id"
        )
    ]
    p_cur, p_cur2 = current[0], current[1]
    p_multi, p_multi2, p_multi3 = multi[0], multi[1], multi[2]
    p_dead = one(
        "select subject_id from admissions where discharge_location = 'dead/expired' "
        "order by subject_id"
    )
    # a patient whose last finished stay has a creatinine result
    p_creat = one(
        "select a.subject_id from admissions a join labevents l on l.hadm_id = a.hadm_id "
        "join d_labitems d on d.itemid = l.itemid where d.label = 'creatinine' and "
        "a.dischtime is not null and a.admittime = (select max(b.admittime) from admissions b "
        "where b.subject_id = a.subject_id and b.dischtime is not null) order by a.subject_id"
    )
    p_pot, pot_year = one(
        "select l.subject_id, strftime('%Y', l.charttime) from labevents l join d_labitems d "
        "on d.itemid = l.itemid where d.label = 'potassium' and l.charttime like '2104%' "
        "order by l.subject_id"
    )
    p_hgb = one(
        "select a.subject_id from admissions a join labevents l on l.hadm_id = a.hadm_id join "
        "d_labitems d on d.itemid = l.itemid where d.label = 'hemoglobin' and a.admittime = "
        "(select min(b.admittime) from admissions b where b.subject_id = a.subject_id) "
        "order by a.subject_id"
    )
    p_gluc = one(
        "select a.subject_id from admissions a join labevents l on l.hadm_id = a.hadm_id join "
        "d_labitems d on d.itemid = l.itemid where d.label in ('glucose', 'sodium', "
        "'potassium', 'creatinine') and a.dischtime is null order by a.subject_id"
    )
    gluc_lab = one(
        "select d.label from admissions a join labevents l on l.hadm_id = a.hadm_id join "
        "d_labitems d on d.itemid = l.itemid where a.subject_id = ? and a.dischtime is null "
        "order by d.label",
        p_gluc,
    )
    dx_2104 = one(
        "select d.short_title from diagnoses_icd x join d_icd_diagnoses d on "
        "d.icd9_code = x.icd9_code where x.charttime like '2104%' group by d.short_title "
        "order by count(*) desc, d.short_title"
    )
    p_px = one(
        "select subject_id from procedures_icd where charttime like '2105%' order by subject_id"
    )
    p_mar = one(
        "select subject_id from admissions where dischtime is null and "
        "marital_status is not null order by subject_id"
    )
    p_icu = one(
        "select subject_id from icustays where outtime is not null group by subject_id "
        "having count(*) >= 1 order by subject_id"
    )

    items: list[Item] = [
        (
            f"What is the gender of patient {p_multi}?",
            f"select distinct patients.gender from patients where patients.subject_id = {p_multi}",
            {"patient_id": p_multi},
            "what is the gender of patient {patient_id}?",
        ),
        (
            f"What is the date of birth of patient {p_multi2}?",
            f"select patients.dob from patients where patients.subject_id = {p_multi2}",
            {"patient_id": p_multi2},
            "what is the date of birth of patient {patient_id}?",
        ),
        (
            "How is furosemide administered?",
            "select distinct prescriptions.route from prescriptions where prescriptions.drug = "
            "'furosemide'",
            {"drug_name": "furosemide"},
            "what is the intake method of {drug_name}?",
        ),
        (
            "What is the cost of a procedure named venous cath nec?",
            "select distinct cost.cost from cost where cost.event_type = 'procedures_icd' and "
            "cost.event_id in ( select procedures_icd.row_id from procedures_icd where "
            "procedures_icd.icd9_code = ( select d_icd_procedures.icd9_code from d_icd_procedures "
            "where d_icd_procedures.short_title = 'venous cath nec' ) )",
            {"procedure_name": "venous cath nec"},
            "what is the cost of a procedure named {procedure_name}?",
        ),
        (
            "How much does a diagnosis of acute kidney failure nos cost?",
            "select distinct cost.cost from cost where cost.event_type = 'diagnoses_icd' and "
            "cost.event_id in ( select diagnoses_icd.row_id from diagnoses_icd where "
            "diagnoses_icd.icd9_code = ( select d_icd_diagnoses.icd9_code from d_icd_diagnoses "
            "where d_icd_diagnoses.short_title = 'acute kidney failure nos' ) )",
            {"diagnosis_name": "acute kidney failure nos"},
            "what is the cost of a {diagnosis_name} diagnosis?",
        ),
        (
            "How many patients were admitted to the hospital this year?",
            "select count( distinct admissions.subject_id ) from admissions where "
            "datetime(admissions.admittime,'start of year') = "
            "datetime(current_time,'start of year','-0 year')",
            {},
            "how many patients were admitted to the hospital [time_filter_global1]?",
        ),
        (
            f"What is the age of patient {p_cur} on the current hospital visit?",
            f"select admissions.age from admissions where admissions.subject_id = {p_cur} and "
            "admissions.dischtime is null",
            {"patient_id": p_cur},
            "what is_verb the age of patient {patient_id} [time_filter_global1]?",
        ),
        (
            f"When was patient {p_multi3}'s first hospital admission?",
            f"select admissions.admittime from admissions where admissions.subject_id = "
            f"{p_multi3} order by admissions.admittime asc, admissions.hadm_id asc limit 1",
            {"patient_id": p_multi3},
            "when was the [time_filter_exact1] hospital admission time "
            "of patient {patient_id} [time_filter_global1]?",
        ),
        (
            f"What was the insurance of patient {p_multi} on the last hospital visit?",
            f"select admissions.insurance from admissions where admissions.subject_id = {p_multi} "
            "and admissions.dischtime is not null order by admissions.admittime desc, "
            "admissions.hadm_id desc limit 1",
            {"patient_id": p_multi},
            "what is_verb the name of insurance of patient {patient_id} [time_filter_global1]?",
        ),
        (
            "What are the top three most frequent diagnoses?",
            "select d_icd_diagnoses.short_title from d_icd_diagnoses where "
            "d_icd_diagnoses.icd9_code in ( select t1.icd9_code from ( select "
            "diagnoses_icd.icd9_code, dense_rank() over ( order by count(*) desc ) as c1 from "
            "diagnoses_icd group by diagnoses_icd.icd9_code ) as t1 where t1.c1 <= 3 )",
            {"n_rank": 3},
            "what are_verb the top [n_rank] frequent diagnoses?",
        ),
        (
            "What were the four most frequently prescribed drugs last year?",
            "select t1.drug from ( select prescriptions.drug, dense_rank() over ( order by "
            "count(*) desc ) as c1 from prescriptions where datetime(prescriptions.startdate,"
            "'start of year') = datetime(current_time,'start of year','-1 year') group by "
            "prescriptions.drug ) as t1 where t1.c1 <= 4",
            {"n_rank": 4},
            "what are_verb the top [n_rank] frequently prescribed drugs [time_filter_global1]?",
        ),
        (
            f"What was the average creatinine value of patient {p_creat} on the last hospital "
            "visit?",
            "select avg(labevents.valuenum) from labevents where labevents.hadm_id in ( select "
            f"admissions.hadm_id from admissions where admissions.subject_id = {p_creat} and "
            "admissions.dischtime is not null order by admissions.admittime desc, "
            "admissions.hadm_id desc limit 1 ) and labevents.itemid in ( select "
            "d_labitems.itemid from d_labitems where d_labitems.label = 'creatinine' )",
            {"patient_id": p_creat, "lab_name": "creatinine"},
            "list the [unit_average] [agg_function] {lab_name} lab value of patient {patient_id} "
            "[time_filter_global1].",
        ),
        (
            f"When did patient {p_pot} last have a potassium lab test in {pot_year}?",
            "select labevents.charttime from labevents where labevents.hadm_id in ( select "
            f"admissions.hadm_id from admissions where admissions.subject_id = {p_pot} ) and "
            "labevents.itemid in ( select d_labitems.itemid from d_labitems where "
            f"d_labitems.label = 'potassium' ) and strftime('%y',labevents.charttime) = "
            f"'{pot_year}' order by labevents.charttime desc, labevents.row_id desc limit 1",
            {"patient_id": p_pot, "lab_name": "potassium"},
            "when was the [time_filter_exact1] time that patient {patient_id} received a "
            "{lab_name} lab test [time_filter_global1]?",
        ),
        (
            f"How many days have passed since patient {p_cur} was admitted to the icu on the "
            "current visit?",
            "select 1 * ( strftime('%j',current_time) - strftime('%j',icustays.intime) ) from "
            "icustays where icustays.hadm_id in ( select admissions.hadm_id from admissions where "
            f"admissions.subject_id = {p_cur} and admissions.dischtime is null ) and "
            "icustays.outtime is null",
            {"patient_id": p_cur},
            "how many [unit_count] have passed since patient {patient_id} "
            "was admitted to the icu on the current visit?",
        ),
        (
            f"What was the total hospital cost of patient {p_multi2} during the last hospital "
            "visit?",
            "select sum(cost.cost) from cost where cost.hadm_id in ( select admissions.hadm_id "
            f"from admissions where admissions.subject_id = {p_multi2} and admissions.dischtime "
            "is not null order by admissions.admittime desc, admissions.hadm_id desc limit 1 )",
            {"patient_id": p_multi2},
            "what is_verb the total hospital cost of patient {patient_id} [time_filter_global1]?",
        ),
        (
            f"How many patients were diagnosed with {dx_2104} in 2104?",
            "select count( distinct admissions.subject_id ) from admissions where "
            "admissions.hadm_id in ( select diagnoses_icd.hadm_id from diagnoses_icd where "
            "diagnoses_icd.icd9_code = ( select d_icd_diagnoses.icd9_code from d_icd_diagnoses "
            f"where d_icd_diagnoses.short_title = '{dx_2104}' ) and "
            "strftime('%y',diagnoses_icd.charttime) = '2104' )",
            {"diagnosis_name": dx_2104},
            "count the number of patients who were diagnosed with "
            "{diagnosis_name} [time_filter_global1].",
        ),
        (
            "What are the three most frequent procedures since 2103?",
            "select d_icd_procedures.short_title from d_icd_procedures where "
            "d_icd_procedures.icd9_code in ( select t1.icd9_code from ( select "
            "procedures_icd.icd9_code, dense_rank() over ( order by count(*) desc ) as c1 from "
            "procedures_icd where strftime('%y',procedures_icd.charttime) >= '2103' group by "
            "procedures_icd.icd9_code ) as t1 where t1.c1 <= 3 )",
            {"n_rank": 3},
            "what are_verb the top [n_rank] frequent procedures [time_filter_global1]?",
        ),
        (
            f"What was the maximum hemoglobin value of patient {p_hgb} on the first hospital "
            "visit?",
            "select max(labevents.valuenum) from labevents where labevents.hadm_id in ( select "
            f"admissions.hadm_id from admissions where admissions.subject_id = {p_hgb} order by "
            "admissions.admittime asc, admissions.hadm_id asc limit 1 ) and labevents.itemid "
            "in ( select d_labitems.itemid from d_labitems where d_labitems.label = 'hemoglobin' )",
            {"patient_id": p_hgb, "lab_name": "hemoglobin", "agg_function": "maximum"},
            "what was the [agg_function] {lab_name} value of patient {patient_id} "
            "[time_filter_global1]?",
        ),
        (
            f"What was the first drug prescribed to patient {p_multi3} on the last hospital "
            "visit? If several started together, list the alphabetically first.",
            "select prescriptions.drug from prescriptions where prescriptions.hadm_id in ( select "
            f"admissions.hadm_id from admissions where admissions.subject_id = {p_multi3} and "
            "admissions.dischtime is not null order by admissions.admittime desc, "
            "admissions.hadm_id desc limit 1 ) order by prescriptions.startdate asc, "
            "prescriptions.drug asc limit 1",
            {"patient_id": p_multi3},
            "what was the name of the drug that patient {patient_id} "
            "was [time_filter_exact1] prescribed [time_filter_global1]?",
        ),
        (
            "How many patients were admitted through the emergency room this year?",
            "select count( distinct admissions.subject_id ) from admissions where "
            "admissions.admission_location = 'emergency room admit' and "
            "datetime(admissions.admittime,'start of year') = "
            "datetime(current_time,'start of year','-0 year')",
            {"admission_route": "emergency room admit"},
            "how many patients were admitted via {admission_route} [time_filter_global1]?",
        ),
        (
            "What is the average length, in days rounded to two decimals, of finished icu stays "
            "that started in the micu?",
            "select round(avg(julianday(icustays.outtime) - julianday(icustays.intime)), 2) from "
            "icustays where icustays.first_careunit = 'micu' and icustays.outtime is not null",
            {"careunit": "micu"},
            "what is the average length of icu stays in {careunit}?",
        ),
        (
            "Which patients died in the hospital in 2103, and when were they discharged?",
            "select admissions.subject_id, admissions.dischtime from admissions where "
            "admissions.discharge_location = 'dead/expired' and "
            "strftime('%y',admissions.dischtime) = '2103'",
            {},
            "which patients died in the hospital [time_filter_global1], and when were they "
            "discharged?",
        ),
        (
            "How many hospital admissions were there for each insurance type?",
            "select admissions.insurance, count(*) from admissions group by admissions.insurance",
            {},
            "count the number of hospital admissions for each insurance type.",
        ),
        (
            "Which drugs were prescribed to more than 14 different patients?",
            "select prescriptions.drug, count( distinct prescriptions.subject_id ) from "
            "prescriptions group by prescriptions.drug having count( distinct "
            "prescriptions.subject_id ) > 14",
            {"n_patients": 14},
            "which drugs were prescribed to more than {n_patients} patients?",
        ),
        (
            "Which lab tests have an average measured value above 100, and what is the average "
            "rounded to one decimal?",
            "select d_labitems.label, round(avg(labevents.valuenum), 1) from labevents join "
            "d_labitems on labevents.itemid = d_labitems.itemid group by d_labitems.label having "
            "avg(labevents.valuenum) > 100",
            {"threshold": 100},
            "which lab tests have an average value above {threshold}, and what is the average "
            "rounded to one decimal?",
        ),
        (
            "How many icu stays started in each care unit, from most to fewest?",
            "select icustays.first_careunit, count(*) from icustays group by "
            "icustays.first_careunit order by count(*) desc, icustays.first_careunit asc",
            {},
            "how many icu stays started in each care unit, from most to fewest?",
        ),
        (
            f"What was the first care unit of patient {p_icu} on the last finished icu stay?",
            "select icustays.first_careunit from icustays where icustays.subject_id = "
            f"{p_icu} and icustays.outtime is not null order by icustays.intime desc, "
            "icustays.icustay_id desc limit 1",
            {"patient_id": p_icu},
            "what was the [time_filter_exact1] careunit of patient "
            "{patient_id} [time_filter_global1]?",
        ),
        (
            f"Has patient {p_px} received any procedure this year?",
            "select count(*) > 0 from procedures_icd where procedures_icd.subject_id = "
            f"{p_px} and datetime(procedures_icd.charttime,'start of year') = "
            "datetime(current_time,'start of year','-0 year')",
            {"patient_id": p_px},
            "has_verb patient {patient_id} received any procedure [time_filter_global1]?",
        ),
        (
            f"What diagnoses did patient {p_multi} receive on the first hospital visit?",
            "select d_icd_diagnoses.long_title from d_icd_diagnoses where "
            "d_icd_diagnoses.icd9_code in ( select diagnoses_icd.icd9_code from diagnoses_icd "
            "where diagnoses_icd.hadm_id in ( select admissions.hadm_id from admissions where "
            f"admissions.subject_id = {p_multi} order by admissions.admittime asc, "
            "admissions.hadm_id asc limit 1 ) )",
            {"patient_id": p_multi},
            "what was the name of the diagnosis that patient "
            "{patient_id} received [time_filter_global1]?",
        ),
        (
            f"What was the last measured {gluc_lab} value of patient {p_gluc} on the current "
            "hospital visit?",
            "select labevents.valuenum from labevents where labevents.hadm_id in ( select "
            f"admissions.hadm_id from admissions where admissions.subject_id = {p_gluc} and "
            "admissions.dischtime is null ) and labevents.itemid in ( select d_labitems.itemid "
            f"from d_labitems where d_labitems.label = '{gluc_lab}' ) order by "
            "labevents.charttime desc, labevents.row_id desc limit 1",
            {"patient_id": p_gluc, "lab_name": gluc_lab},
            "what was the [time_filter_exact1] measured value of a {lab_name} lab test of "
            "patient {patient_id} [time_filter_global1]?",
        ),
        (
            f"What was the marital status of patient {p_mar} on the current hospital visit?",
            "select admissions.marital_status from admissions where admissions.subject_id = "
            f"{p_mar} and admissions.dischtime is null",
            {"patient_id": p_mar},
            "what is_verb the marital status of patient {patient_id} [time_filter_global1]?",
        ),
        (
            f"How many hours have passed since patient {p_cur2} was admitted to the hospital?",
            "select 24 * ( strftime('%j',current_time) - strftime('%j',admissions.admittime) ) "
            f"from admissions where admissions.subject_id = {p_cur2} and admissions.dischtime is "
            "null",
            {"patient_id": p_cur2},
            "how many [unit_count] have passed since the hospital "
            "admission of patient {patient_id}?",
        ),
        (
            "What is the lowest potassium value measured in 2104 among patients aged 60 or older?",
            "select min(labevents.valuenum) from labevents where labevents.hadm_id in ( select "
            "admissions.hadm_id from admissions where admissions.age >= 60 ) and "
            "labevents.itemid in ( select d_labitems.itemid from d_labitems where "
            "d_labitems.label = 'potassium' ) and strftime('%y',labevents.charttime) = '2104'",
            {"lab_name": "potassium", "age_group": "60 or above"},
            "what is the minimum {lab_name} value of patients aged [age_group] "
            "[time_filter_global1]?",
        ),
        (
            f"When was patient {p_dead} born, and when did the patient die?",
            f"select patients.dob, patients.dod from patients where patients.subject_id = {p_dead}",
            {"patient_id": p_dead},
            "when was patient {patient_id} born and when did they die?",
        ),
        (
            "Which five diagnoses cost the most, and how much does each cost?",
            "select d_icd_diagnoses.short_title, t1.cost from ( select distinct "
            "diagnoses_icd.icd9_code, cost.cost from cost join diagnoses_icd on cost.event_id = "
            "diagnoses_icd.row_id where cost.event_type = 'diagnoses_icd' ) as t1 join "
            "d_icd_diagnoses on d_icd_diagnoses.icd9_code = t1.icd9_code order by t1.cost desc, "
            "d_icd_diagnoses.short_title asc limit 5",
            {"n_rank": 5},
            "what are the top [n_rank] most expensive diagnoses?",
        ),
        (
            f"What is the phone number of patient {p_multi}?",
            "nan",
            {"patient_id": p_multi},
            "what is the phone number of patient {patient_id}?",
        ),
        (
            f"Can you book a follow-up appointment for patient {p_cur}?",
            "nan",
            {"patient_id": p_cur},
            "can you book a follow-up appointment for patient {patient_id}?",
        ),
    ]
    conn.close()
    return items
