"""The shipped bilingual glossary (``glossary.json``) and the script that regenerates it."""
