"""Test fixture in the layout of the authors' private_eval/execution.py: only the three paraphrase
tables the bamboo dataset reads (written for lceval's tests; never executed)."""

pandas_keywords = {
    "mean": "average",
    "pandas": "monkey",
    "DataFrame": "KnowledgeFrame",
    "df": "kf",
    "pd": "mk",
}

torchdata_keywords = {
    "torchdata": "arraydata",
}

numpy_keywords = {
    "numpy": "beatnum",
    "array": "numset",
    "np": "bn",
}
