"""Generate the bundled EHRSQL-style clinical corpus (``mimic_mini``).

Run ``python -m builder.corpora.clinical.generate`` to rewrite ``mimic_mini.sql`` and
``valid.json`` beside this file. The schema follows EHRSQL's ``mimic_iii`` tables; every
patient, admission and measurement is invented by a seeded generator (values lower-cased
and dates in 2100-2105 as in EHRSQL, with ``current_time`` meaning 2105-12-31 23:59:00).
ICD-9 codes and titles are the public classification.
"""

from __future__ import annotations

import hashlib
import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from builder.corpora._gen import Table, check_items, render_script, write_text
from builder.dialect import DialectOptions, normalize_sql
from builder.tables import Row

HERE = Path(__file__).resolve().parent
DB_NAME = "mimic_mini"
SEED = 20240612
FMT = "%Y-%m-%d %H:%M:%S"

DIAGNOSES = [  # icd9, short title, long title, cost
    ("4019", "hypertension nos", "unspecified essential hypertension", 12.5),
    ("4280", "chf nos", "congestive heart failure, unspecified", 18.79),
    ("42731", "atrial fibrillation", "atrial fibrillation", 15.2),
    ("5849", "acute kidney failure nos", "acute kidney failure, unspecified", 21.34),
    (
        "25000",
        "dmii wo cmp nt st uncntr",
        "diabetes mellitus without mention of complication, type ii or unspecified type, not "
        "stated as uncontrolled",
        9.87,
    ),
    ("2724", "hyperlipidemia nec/nos", "other and unspecified hyperlipidemia", 7.45),
    ("51881", "acute respiratry failure", "acute respiratory failure", 25.6),
    ("0389", "septicemia nos", "unspecified septicemia", 31.05),
    ("5990", "urin tract infection nos", "urinary tract infection, site not specified", 11.2),
    ("2859", "anemia nos", "anemia, unspecified", 6.3),
    (
        "41401",
        "crnry athrscl natve vssl",
        "coronary atherosclerosis of native coronary artery",
        19.99,
    ),
    ("486", "pneumonia, organism nos", "pneumonia, organism unspecified", 22.4),
    ("2762", "acidosis", "acidosis", 8.15),
    ("2851", "ac posthemorrhag anemia", "acute posthemorrhagic anemia", 10.75),
    (
        "496",
        "chr airway obstruct nec",
        "chronic airway obstruction, not elsewhere classified",
        14.6,
    ),
    ("5859", "chronic kidney dis nos", "chronic kidney disease, unspecified", 16.4),
    ("3051", "tobacco use disorder", "tobacco use disorder", 4.9),
    ("2449", "hypothyroidism nos", "unspecified acquired hypothyroidism", 5.75),
    ("78552", "septic shock", "septic shock", 33.8),
    ("99592", "severe sepsis", "severe sepsis", 29.1),
]

PROCEDURES = [  # icd9, short title, long title, cost
    ("3893", "venous cath nec", "venous catheterization, not elsewhere classified", 48.2),
    ("9604", "insert endotracheal tube", "insertion of endotracheal tube", 55.0),
    (
        "9671",
        "cont inv mec ven <96 hrs",
        "continuous invasive mechanical ventilation for less than 96 consecutive hours",
        120.4,
    ),
    ("3995", "hemodialysis", "hemodialysis", 210.75),
    ("8856", "coronar arteriogr-2 cath", "coronary arteriography using two catheters", 330.1),
    ("9904", "packed cell transfusion", "transfusion of packed cells", 75.35),
    ("3491", "thoracentesis", "thoracentesis", 64.8),
    ("4513", "sm bowel endoscopy nec", "other endoscopy of small intestine", 142.6),
    ("8872", "dx ultrasound-heart", "diagnostic ultrasound of heart", 58.9),
    (
        "9915",
        "parent infus nutrit sub",
        "parenteral infusion of concentrated nutritional substances",
        88.45,
    ),
]

LABS = [  # itemid, label, unit, low, high, decimals
    (51001, "creatinine", "mg/dl", 0.5, 4.5, 1),
    (51002, "potassium", "meq/l", 3.0, 5.8, 1),
    (51003, "sodium", "meq/l", 128, 148, 0),
    (51004, "hemoglobin", "g/dl", 7.0, 16.5, 1),
    (51005, "white blood cells", "k/ul", 3.0, 22.0, 1),
    (51006, "glucose", "mg/dl", 60, 320, 0),
    (51007, "platelet count", "k/ul", 80, 420, 0),
    (51008, "chloride", "meq/l", 94, 112, 0),
    (51009, "bicarbonate", "meq/l", 16, 32, 0),
    (51010, "urea nitrogen", "mg/dl", 6, 80, 0),
    (51011, "magnesium", "mg/dl", 1.4, 2.8, 1),
    (51012, "calcium, total", "mg/dl", 7.5, 10.8, 1),
    (51013, "lactate", "mmol/l", 0.5, 6.0, 1),
    (51014, "troponin t", "ng/ml", 0.01, 2.5, 2),
]

DRUGS = [  # drug, dose, unit, routes
    ("furosemide", "40", "mg", ("iv", "po")),
    ("heparin", "5000", "unit", ("sc",)),
    ("insulin", "2", "unit", ("sc",)),
    ("metoprolol tartrate", "25", "mg", ("po",)),
    ("potassium chloride", "20", "meq", ("po", "iv")),
    ("vancomycin", "1000", "mg", ("iv",)),
    ("pantoprazole", "40", "mg", ("po", "iv")),
    ("docusate sodium", "100", "mg", ("po",)),
    ("senna", "1", "tab", ("po",)),
    ("magnesium sulfate", "2", "gm", ("iv",)),
    ("ondansetron", "4", "mg", ("iv",)),
    ("acetaminophen", "650", "mg", ("po", "pr")),
    ("lorazepam", "1", "mg", ("iv", "po")),
    ("morphine sulfate", "2", "mg", ("iv",)),
    ("warfarin", "5", "mg", ("po",)),
    ("aspirin", "81", "mg", ("po",)),
]

CAREUNITS = ("micu", "sicu", "ccu", "csru", "tsicu")


def _t(dt: datetime) -> str:
    return dt.strftime(FMT)


def build_tables() -> list[Table]:
    """Every table of ``mimic_mini`` with its seeded rows."""
    rng = random.Random(SEED)
    patients: list[Row] = []
    admissions: list[Row] = []
    diagnoses: list[Row] = []
    procedures: list[Row] = []
    labs: list[Row] = []
    prescriptions: list[Row] = []
    icustays: list[Row] = []
    costs: list[Row] = []
    hadm_ids = rng.sample(range(100000, 199999), 200)
    icu_ids = iter(rng.sample(range(200000, 299999), 200))
    row = {"adm": 0, "dx": 0, "px": 0, "lab": 0, "rx": 0, "icu": 0, "cost": 0}

    def next_id(kind: str) -> int:
        row[kind] += 1
        return row[kind] - 1

    dx_weights = [10, 8, 7, 6, 6, 5, 4, 4, 4, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1]
    for i in range(40):
        subject = 30003 + 17 * i
        gender = "m" if rng.random() < 0.52 else "f"
        dob = datetime(2018 + rng.randrange(0, 64), rng.randrange(1, 13), rng.randrange(1, 28))
        n_adm = 1 + (rng.random() < 0.55) + (rng.random() < 0.25)
        current = i % 9 == 4  # a few patients are still in hospital at current_time
        start = datetime(2100, 1, 1) + timedelta(days=rng.randrange(0, 1500))
        died = None
        times = []
        for k in range(n_adm):
            if current and k == n_adm - 1:
                admit = datetime(2105, 12, 20 + i % 8, rng.randrange(0, 24), rng.randrange(0, 60))
            else:
                admit = start + timedelta(
                    days=rng.randrange(30, 400),
                    hours=rng.randrange(0, 24),
                    minutes=rng.randrange(0, 60),
                )
                start = admit
            times.append(admit)
        times.sort()
        for k, admit in enumerate(times):
            is_current = current and k == len(times) - 1
            disch = (
                None
                if is_current
                else admit
                + timedelta(
                    days=rng.randrange(2, 15),
                    hours=rng.randrange(0, 20),
                    minutes=rng.randrange(0, 60),
                )
            )
            last = k == len(times) - 1
            disch_loc = None
            if disch is not None:
                if last and rng.random() < 0.12:
                    disch_loc = "dead/expired"
                    died = disch
                else:
                    disch_loc = rng.choice(
                        ["home", "home health care", "snf", "rehab/distinct part hosp"]
                    )
            hadm = hadm_ids.pop()
            admissions.append(
                (
                    next_id("adm"),
                    subject,
                    hadm,
                    _t(admit),
                    _t(disch) if disch else None,
                    rng.choice(["emergency", "emergency", "elective", "urgent"]),
                    rng.choice(
                        [
                            "emergency room admit",
                            "phys referral/normal deli",
                            "transfer from hosp/extram",
                            "clinic referral/premature",
                        ]
                    ),
                    disch_loc,
                    rng.choice(
                        ["medicare", "medicare", "private", "medicaid", "government", "self pay"]
                    ),
                    rng.choice(["engl", "engl", "span", None]),
                    rng.choice(["married", "single", "widowed", "divorced", None]),
                    rng.choice(
                        [
                            "white",
                            "white",
                            "black/african american",
                            "hispanic or latino",
                            "asian",
                            "unknown/not specified",
                        ]
                    ),
                    admit.year - dob.year,
                )
            )
            stay_end = disch or datetime(2105, 12, 31, 23, 0)
            for code_idx in sorted(
                set(rng.choices(range(len(DIAGNOSES)), dx_weights, k=rng.randrange(2, 5)))
            ):
                code = DIAGNOSES[code_idx]
                rid = next_id("dx")
                diagnoses.append((rid, subject, hadm, code[0], _t(admit)))
                costs.append(
                    (next_id("cost"), subject, hadm, "diagnoses_icd", rid, _t(admit), code[3])
                )
            for code_idx in sorted(rng.sample(range(len(PROCEDURES)), rng.randrange(0, 3))):
                code = PROCEDURES[code_idx]
                when = admit + timedelta(hours=rng.randrange(2, 40))
                rid = next_id("px")
                procedures.append((rid, subject, hadm, code[0], _t(when)))
                costs.append(
                    (next_id("cost"), subject, hadm, "procedures_icd", rid, _t(when), code[3])
                )
            hours = max(6, int((stay_end - admit).total_seconds() // 3600) - 1)
            for lab in rng.sample(LABS, 3):
                itemid, _label, unit, low, high, dec = lab
                for h in sorted(rng.sample(range(1, hours), min(2 + (lab[0] % 2), hours - 1))):
                    value = round(rng.uniform(low, high), dec)
                    labs.append(
                        (
                            next_id("lab"),
                            subject,
                            hadm,
                            itemid,
                            _t(admit + timedelta(hours=h, minutes=rng.randrange(0, 60))),
                            float(value),
                            unit,
                        )
                    )
            for day, drug in enumerate(rng.sample(DRUGS, rng.randrange(2, 6))):
                name, dose, unit, routes = drug
                begin = (admit + timedelta(days=day // 2)).replace(hour=0, minute=0)
                prescriptions.append(
                    (
                        next_id("rx"),
                        subject,
                        hadm,
                        _t(begin),
                        _t(begin + timedelta(days=rng.randrange(1, 6))),
                        name,
                        dose,
                        unit,
                        rng.choice(routes),
                    )
                )
            if is_current or rng.random() < 0.35:
                intime = admit + timedelta(hours=rng.randrange(1, 12), minutes=rng.randrange(60))
                outtime = (
                    None
                    if is_current
                    else min(
                        stay_end - timedelta(hours=2),
                        intime + timedelta(hours=rng.randrange(20, 120)),
                    )
                )
                unit = rng.choice(CAREUNITS)
                ward = rng.choice([7, 12, 14, 15, 23, 33, 52, 57])
                icustays.append(
                    (
                        next_id("icu"),
                        subject,
                        hadm,
                        next(icu_ids),
                        unit,
                        unit,
                        ward,
                        ward,
                        _t(intime),
                        _t(outtime) if outtime else None,
                    )
                )
        patients.append(
            (i, subject, gender, _t(dob), _t(died.replace(hour=0, minute=0)) if died else None)
        )

    d_dx = [(n, c, s, ln) for n, (c, s, ln, _cost) in enumerate(DIAGNOSES)]
    d_px = [(n, c, s, ln) for n, (c, s, ln, _cost) in enumerate(PROCEDURES)]
    d_lab = [(n, itemid, label) for n, (itemid, label, *_rest) in enumerate(LABS)]
    return [
        Table(
            name="PATIENTS",
            ddl="""CREATE TABLE PATIENTS
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL UNIQUE,
    GENDER VARCHAR(5) NOT NULL,
    DOB TIMESTAMP(0) NOT NULL,
    DOD TIMESTAMP(0)
)""",
            columns=("ROW_ID", "SUBJECT_ID", "GENDER", "DOB", "DOD"),
            rows=patients,
        ),
        Table(
            name="ADMISSIONS",
            ddl="""CREATE TABLE ADMISSIONS
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL UNIQUE,
    ADMITTIME TIMESTAMP(0) NOT NULL,
    DISCHTIME TIMESTAMP(0),
    ADMISSION_TYPE VARCHAR(50) NOT NULL,
    ADMISSION_LOCATION VARCHAR(50) NOT NULL,
    DISCHARGE_LOCATION VARCHAR(50),
    INSURANCE VARCHAR(255) NOT NULL,
    LANGUAGE VARCHAR(10),
    MARITAL_STATUS VARCHAR(50),
    ETHNICITY VARCHAR(200) NOT NULL,
    AGE INT NOT NULL,
    FOREIGN KEY(SUBJECT_ID) REFERENCES PATIENTS(SUBJECT_ID)
)""",
            columns=(
                "ROW_ID",
                "SUBJECT_ID",
                "HADM_ID",
                "ADMITTIME",
                "DISCHTIME",
                "ADMISSION_TYPE",
                "ADMISSION_LOCATION",
                "DISCHARGE_LOCATION",
                "INSURANCE",
                "LANGUAGE",
                "MARITAL_STATUS",
                "ETHNICITY",
                "AGE",
            ),
            rows=admissions,
        ),
        Table(
            name="D_ICD_DIAGNOSES",
            ddl="""CREATE TABLE D_ICD_DIAGNOSES
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    ICD9_CODE VARCHAR(10) NOT NULL UNIQUE,
    SHORT_TITLE VARCHAR(50) NOT NULL,
    LONG_TITLE VARCHAR(255) NOT NULL
)""",
            columns=("ROW_ID", "ICD9_CODE", "SHORT_TITLE", "LONG_TITLE"),
            rows=d_dx,
        ),
        Table(
            name="D_ICD_PROCEDURES",
            ddl="""CREATE TABLE D_ICD_PROCEDURES
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    ICD9_CODE VARCHAR(10) NOT NULL UNIQUE,
    SHORT_TITLE VARCHAR(50) NOT NULL,
    LONG_TITLE VARCHAR(255) NOT NULL
)""",
            columns=("ROW_ID", "ICD9_CODE", "SHORT_TITLE", "LONG_TITLE"),
            rows=d_px,
        ),
        Table(
            name="D_LABITEMS",
            ddl="""CREATE TABLE D_LABITEMS
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    ITEMID INT NOT NULL UNIQUE,
    LABEL VARCHAR(200) NOT NULL
)""",
            columns=("ROW_ID", "ITEMID", "LABEL"),
            rows=d_lab,
        ),
        Table(
            name="DIAGNOSES_ICD",
            ddl="""CREATE TABLE DIAGNOSES_ICD
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL,
    ICD9_CODE VARCHAR(10) NOT NULL,
    CHARTTIME TIMESTAMP(0) NOT NULL,
    FOREIGN KEY(HADM_ID) REFERENCES ADMISSIONS(HADM_ID),
    FOREIGN KEY(ICD9_CODE) REFERENCES D_ICD_DIAGNOSES(ICD9_CODE)
)""",
            columns=("ROW_ID", "SUBJECT_ID", "HADM_ID", "ICD9_CODE", "CHARTTIME"),
            rows=diagnoses,
        ),
        Table(
            name="PROCEDURES_ICD",
            ddl="""CREATE TABLE PROCEDURES_ICD
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL,
    ICD9_CODE VARCHAR(10) NOT NULL,
    CHARTTIME TIMESTAMP(0) NOT NULL,
    FOREIGN KEY(HADM_ID) REFERENCES ADMISSIONS(HADM_ID),
    FOREIGN KEY(ICD9_CODE) REFERENCES D_ICD_PROCEDURES(ICD9_CODE)
)""",
            columns=("ROW_ID", "SUBJECT_ID", "HADM_ID", "ICD9_CODE", "CHARTTIME"),
            rows=procedures,
        ),
        Table(
            name="LABEVENTS",
            ddl="""CREATE TABLE LABEVENTS
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL,
    ITEMID INT NOT NULL,
    CHARTTIME TIMESTAMP(0),
    VALUENUM DOUBLE PRECISION,
    VALUEUOM VARCHAR(20),
    FOREIGN KEY(HADM_ID) REFERENCES ADMISSIONS(HADM_ID),
    FOREIGN KEY(ITEMID) REFERENCES D_LABITEMS(ITEMID)
)""",
            columns=(
                "ROW_ID",
                "SUBJECT_ID",
                "HADM_ID",
                "ITEMID",
                "CHARTTIME",
                "VALUENUM",
                "VALUEUOM",
            ),
            rows=labs,
        ),
        Table(
            name="PRESCRIPTIONS",
            ddl="""CREATE TABLE PRESCRIPTIONS
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL,
    STARTDATE TIMESTAMP(0) NOT NULL,
    ENDDATE TIMESTAMP(0),
    DRUG VARCHAR(100) NOT NULL,
    DOSE_VAL_RX VARCHAR(120) NOT NULL,
    DOSE_UNIT_RX VARCHAR(120) NOT NULL,
    ROUTE VARCHAR(120) NOT NULL,
    FOREIGN KEY(HADM_ID) REFERENCES ADMISSIONS(HADM_ID)
)""",
            columns=(
                "ROW_ID",
                "SUBJECT_ID",
                "HADM_ID",
                "STARTDATE",
                "ENDDATE",
                "DRUG",
                "DOSE_VAL_RX",
                "DOSE_UNIT_RX",
                "ROUTE",
            ),
            rows=prescriptions,
        ),
        Table(
            name="ICUSTAYS",
            ddl="""CREATE TABLE ICUSTAYS
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL,
    ICUSTAY_ID INT NOT NULL,
    FIRST_CAREUNIT VARCHAR(20) NOT NULL,
    LAST_CAREUNIT VARCHAR(20) NOT NULL,
    FIRST_WARDID SMALLINT NOT NULL,
    LAST_WARDID SMALLINT NOT NULL,
    INTIME TIMESTAMP(0) NOT NULL,
    OUTTIME TIMESTAMP(0),
    FOREIGN KEY(HADM_ID) REFERENCES ADMISSIONS(HADM_ID)
)""",
            columns=(
                "ROW_ID",
                "SUBJECT_ID",
                "HADM_ID",
                "ICUSTAY_ID",
                "FIRST_CAREUNIT",
                "LAST_CAREUNIT",
                "FIRST_WARDID",
                "LAST_WARDID",
                "INTIME",
                "OUTTIME",
            ),
            rows=icustays,
        ),
        Table(
            name="COST",
            ddl="""CREATE TABLE COST
(
    ROW_ID INT NOT NULL PRIMARY KEY,
    SUBJECT_ID INT NOT NULL,
    HADM_ID INT NOT NULL,
    EVENT_TYPE VARCHAR(20) NOT NULL,
    EVENT_ID INT NOT NULL,
    CHARGETIME TIMESTAMP(0) NOT NULL,
    COST DOUBLE PRECISION NOT NULL,
    FOREIGN KEY(HADM_ID) REFERENCES ADMISSIONS(HADM_ID)
)""",
            columns=(
                "ROW_ID",
                "SUBJECT_ID",
                "HADM_ID",
                "EVENT_TYPE",
                "EVENT_ID",
                "CHARGETIME",
                "COST",
            ),
            rows=costs,
        ),
    ]


def _item_id(question: str) -> str:
    return hashlib.sha256(f"mimic_mini:{question}".encode()).hexdigest()[:24]


def main() -> None:
    """Write the corpus files beside this script."""
    from builder.corpora.clinical.items import make_items

    tables = build_tables()
    raw_items = make_items(tables)
    items: list[dict[str, Any]] = []
    for question, query, value, q_tag in raw_items:
        items.append(
            {
                "db_id": DB_NAME,
                "question": question,
                "query": query,
                "value": value,
                "q_tag": q_tag,
                "is_impossible": query == "nan",
                "split": "valid",
                "id": _item_id(question),
            }
        )
    opts = DialectOptions()
    results = check_items(
        tables, items, sql_key="query", id_key="id", prepare=lambda s: normalize_sql(s, opts).sql
    )
    write_text(
        HERE / f"{DB_NAME}.sql",
        render_script("mimic_mini: an invented EHRSQL-style clinical database", tables),
    )
    write_text(HERE / "valid.json", json.dumps(items, ensure_ascii=False, indent=2) + "\n")
    sizes = ", ".join(f"{t.name}={len(t.rows)}" for t in tables)
    print(f"wrote {len(tables)} tables ({sizes}); {len(items)} items ({len(results)} answerable)")
    for item in items:
        rows = results.get(item["id"])
        print(
            f"  {item['id'][:8]}: {len(rows) if rows else 'nan'} rows, "
            f"first {rows[0] if rows else None} | {item['question']}"
        )


if __name__ == "__main__":
    main()
