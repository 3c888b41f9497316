"""The trace-level failure audit of failed attempts.

A proposed primary cause per failed attempt (Table 13), confirmed or revised by a
researcher, counted in the report (Figure 7).
"""

from dataspace.failure_taxonomy import STAGES, SUBTYPES, SYMPTOMS, Subtype, symptom_of

__all__ = ["STAGES", "SUBTYPES", "SYMPTOMS", "Subtype", "symptom_of"]
