"""NeedleBench's prompts, byte for byte (open-compass/opencompass at commit
a5acc4bba3b658f151617a3b393602110fb7a740, opencompass/datasets/needlebench/: origin.py,
multi.py, parallel.py and atc.py, `position='End'` and `guide=True` as every config sets them).
Each wrapper holds `{context}` (lceval's CONTEXT_SLOT) where the haystack goes, and
`{question}`."""

from __future__ import annotations

__all__ = ["ATC_QUESTION", "RELATIONS", "WRAPPERS", "guide_question", "parallel_question"]

_EN_HEAD = ("You are an intelligent AI assistant skilled in answering user questions.\nPlease keep your answers concise "
            "and clear. Do not talk about irrelevant topics or repeat your answers.\n")
_ZH_HEAD = "你是一个善于回答用户问题的智能AI助手\n请保持你的回答简洁清楚。不要说和下面文档中的无关的话，或重复你的回答\n"

#: (kind, language) -> the prompt around the haystack: origin.py / multi.py `_generate_prompt`,
#: parallel.py's (plural "questions", a final newline; Chinese: "read the document first")
WRAPPERS = {
    ("single", "en"): _EN_HEAD + "The document given to you by the user is {context}\n\nNow, the question is: {question}",
    ("single", "zh"): _ZH_HEAD + "用户现在给你的文档是{context}\n\n现在请问：{question}",
    ("multi_reasoning", "en"): _EN_HEAD + "The document given to you by the user is {context}\n\nNow, the question is: {question}",
    ("multi_reasoning", "zh"): _ZH_HEAD + "用户现在给你的文档是{context}\n\n现在请问：{question}",
    ("multi_retrieval", "en"): _EN_HEAD + "The document given to you by the user is {context}\n\nNow, the questions are: "
                                          "{question}\n",
    ("multi_retrieval", "zh"): _ZH_HEAD + "请先仔细阅读下面的文档再依次回答最后提出的问题\n用户现在给你的文档是{context}\n\n现在请问："
                                          "{question}\n",
}

_GUIDE = {"en": "Before answering, please consider what in the document is most relevant to this question.",
          "zh": "在回答之前，请思考文档中与此问题最相关的内容是什么。"}


def guide_question(kind: str, language: str, question: str) -> str:
    """`_modify_retrieval_question` with guide=True: before the answer format (single, parallel:
    the question split at "Please answer in the format" / "请按照"), or appended (multi.py)."""
    if kind == "multi_reasoning":
        return question + _GUIDE[language]
    mark = "Please answer in the format" if language == "en" else "请按照"
    parts = question.split(mark)
    if len(parts) < 2:
        raise ValueError(f"the question holds no {mark!r}")
    if language == "en":
        return parts[0] + _GUIDE["en"] + " Please answer in the format" + parts[1]
    return parts[0] + _GUIDE["zh"] + "请按照" + parts[1]


def parallel_question(language: str, questions: list[str]) -> str:
    """parallel.py's combined question: each question to its "?" (or "？"), joined with "、", then
    the answer formats (between the first quotes, to the first "." or "。") joined with "、"."""
    if language == "zh":
        asked = "、".join(q.split("？")[0] + "？" for q in questions)
        formats = "、".join(q.split("'")[1].split("。")[0] for q in questions)
        return asked + "请按照'" + formats + "'的格式回答。"
    asked = "、".join(q.split("?")[0] + "?" for q in questions)
    formats = "、".join(q.split("'")[1].split(".")[0] for q in questions)
    return asked + "Please answer in the format of '" + formats + "'"


#: atc.py: the question after the shuffled story (joined with a space); it starts with a newline
ATC_QUESTION = {
    "en": "\nGiven the scrambled family relationships described above, who is the eldest relative that '{last}' can "
          "trace back to in the context?\nFor example:\nExample 1: If Zhang Qiang's father is Mark, and no further "
          "information about familial relationships is provided in the text, then the oldest relative Zhang Qiang can "
          "trace back to in the provided text is Mark.\nExample 2: If Li Ming's grandmother is Zhang Hong, and Zhang "
          "Hong's father is Zhang Qiang, and no further information about familial relationships is provided in the "
          "text, then the oldest relative Li Ming can trace back to in the provided text is Zhang Qiang.\nExample 3: If "
          "Xiao Ming is Zhang Hong's great-granddaughter, Zhang Hong's grandmother is Wang Hua, and Wang Hua's father is "
          "Wang Gang, and no further information about familial relationships is provided in the text, then the oldest "
          "relative Xiao Ming can trace back to in the provided text is Wang Gang.",
    "zh": "\n在上面提供的打乱的家族关系文本中，'{last}'的能够向上追溯到的最年长的亲人是谁？\n例如：\n例子1.如果张强的父亲是马克，除此以外提供的文本中"
          "没有更多关于亲属关系的信息，那么在提供的文本中张强能够向上追溯到的最年长的亲人就是马克。\n例子2.如果李明的姥姥是张红，而张红的父亲是张强，除此"
          "以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中李明能够向上追溯到的最年长的亲人就是张强。\n例子3.如果小明是张红的曾孙女，张红的"
          "祖母是王华，王华的父亲是王刚，除此以外提供的文本中没有更多关于亲属关系的信息，那么小明能够向上追溯到的最年长的亲人就是王刚。\n",
}

#: atc.py: (relationship terms, sentence templates) per language
RELATIONS = {
    "en": (["father", "mother", "dad", "mom", "grandfather", "grandmother", "maternal grandmother",
            "maternal grandfather", "paternal grandfather", "paternal grandmother"],
           ["{A} is {B}'s {relationship}.", "{B}'s {relationship} is {A}.",
            "{A}, as {B}'s {relationship}, has a significant impact on {B}'s upbringing.",
            "{A} is not only {B}'s {relationship} but also {B}'s role model.", "{B} is the child of {A}.",
            "For {B}, {A} is not just a {relationship}, but also a friend.",
            "{A} plays the role of {B}'s {relationship} in {B}'s life.", "{B} considers {A} as their {relationship}."]),
    "zh": (["父亲", "母亲", "爸爸", "妈妈", "爷爷", "奶奶", "姥姥", "姥爷", "外公", "外婆"],
           ["{A}是{B}的{relationship}。", "{B}的{relationship}是{A}。", "{A}作为{B}的{relationship}，对{B}的成长有重要影响。",
            "{A}不仅是{B}的{relationship}，还是{B}的榜样。", "{B}是{A}所生的孩子。", "{A}对{B}来说，不只是一个{relationship}，还是一个朋友。",
            "{A}在{B}的生命中扮演着{relationship}的角色。", "{B}把{A}视为其{relationship}。"]),
}
