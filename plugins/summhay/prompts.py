"""SummHay prompts, byte for byte as the authors ship them (salesforce/summary-of-a-haystack,
`prompts/summarization_conv.txt`, `prompts/summarization_news.txt`, `prompts/eval_summhay.txt`)
and filled as `populate_summaries.summarize` / `populate_eval.evaluate_insights` fill them.

Laban et al., 2024, §3.3: the system gets the query, is told the number of bullets (= the subtopic's
number of insights) and must cite documents as [i]; the authors' prompts add the 300-word
limit. The coverage prompt is Appendix A.2 with the three few-shot examples of the repo file.
"""

from __future__ import annotations

import json

SUMMARIZATION_CONV = (
    'You are given [N_conversations] conversations within the following scenario: "[SCENARIO]".\n'
    "The conversations involve the following participants: [PARTICIPANTS]. In each conversation, the "
    "participants might be different, with different names, but all the conversations fall into the same "
    "scenario.\n\n```\n[CONVERSATIONS]\n```\n\nYour objective is to produce a summary of all the document "
    "with [N_insights] bullet points covering the main insights regarding the following query: [QUERY].\n"
    "Careful:\n- [Format] You should format your summary as a bullet point list, where each bullet point is "
    "a different insight.\n- [References] For each insight, you should refer to the relevant conversations "
    "by using the IDs given in the conversation list. For example: \"some of the doctors ask patients for "
    "their medical history[1][4]\" which means that the insight is supported by Document 1 and Document 4. "
    "No need to say \"Conversation 14\", you can just use the following structure: \"[14]\".\n- [Length] "
    "Your summary should be no longer than 300 words in total."
)

SUMMARIZATION_NEWS = (
    'You are given [N_articles] news articles about the main subject "[TOPIC]."\n\n```\n[ARTICLES]\n```\n\n'
    'In some of the conversation the following topic is discussed: "[SUBTOPIC]".\nYour objective is to '
    "summarize the [N_insights] main insights from the conversations regarding that topic.\nCareful:\n- "
    "[Format] You should format your summary as a bullet point list, where each bullet point is a different "
    "insight consisting of a single sentence.\n- [References] For each insight, you should refer to the "
    "relevant articles by using the IDs given in the article list. For example: \"Increased demand for "
    "vaccines may strain already fragile supply chains [1][4]\" which means that the insight is supported "
    "by Document 1 and Document 4. No need to say \"Article 14\", you can just use the following structure: "
    "\"[14]\".\n- [Length] Your summary should be no longer than 300 words in total."
)

#: §5.5 no-document baseline. The paper gives no prompt ("we instruct GPT-4o to imagine what the
#: insights should be ... without providing any of the documents"); ours is the summarization
#: prompt of the domain with the documents removed and the instruction to imagine them, keeping
#: the bullet count, citation format and length limit so the same scorer applies. Our wording.
NO_DOCUMENT_CONV = (
    'Imagine [N_conversations] conversations within the following scenario: "[SCENARIO]".\n'
    "The conversations would involve the following participants: [PARTICIPANTS]. You are not given the "
    "conversations: imagine what they would say.\n\nYour objective is to produce a summary of all the "
    "conversations with [N_insights] bullet points covering the main insights regarding the following "
    "query: [QUERY].\nCareful:\n- [Format] You should format your summary as a bullet point list, where "
    "each bullet point is a different insight.\n- [References] For each insight, you should refer to the "
    "relevant conversations by their IDs (1 to [N_conversations]) using the following structure: \"[14]\".\n"
    "- [Length] Your summary should be no longer than 300 words in total."
)
NO_DOCUMENT_NEWS = (
    'Imagine [N_articles] news articles about the main subject "[TOPIC]." You are not given the articles: '
    'imagine what they would report.\n\nIn some of the articles the following topic is discussed: '
    '"[SUBTOPIC]".\nYour objective is to summarize the [N_insights] main insights from the articles '
    "regarding that topic.\nCareful:\n- [Format] You should format your summary as a bullet point list, "
    "where each bullet point is a different insight consisting of a single sentence.\n- [References] For "
    "each insight, you should refer to the relevant articles by their IDs (1 to [N_articles]) using the "
    "following structure: \"[14]\".\n- [Length] Your summary should be no longer than 300 words in total."
)

EVAL_SUMMHAY = (
    "You are given a list of bullet points (each with a unique number), and a specific reference insight. "
    "Your objective is to determine whether the reference insight is covered in any of the bullet points. "
    "You must further determine if the insight is partially covered (\"PARTIAL_COVERAGE\") or fully covered "
    "(\"FULL_COVERAGE\") by the bullet points. If the insight is not covered at all, you must return "
    "\"NO_COVERAGE\". See examples below:\n\n"
    "Example Reference Insight 1: \"The doctor asks the patient about their medical history\".\n\n"
    "Example Bullet Points 1:\n{\"bullets\": [\n"
    "    {\"bullet_id\": 1, \"text\": \"The patient often mention that they are worried about medication "
    "side-effect[12][14].\"},\n"
    "    {\"bullet_id\": 2, \"text\": \"The doctor and patient spend time going over symptoms [3][8], "
    "particularly the initial symptoms and the progression in the last few months[5].\"},\n"
    "    {\"bullet_id\": 3, \"text\": \"The doctor and patient discuss medical history within the patient's "
    "family[1][5], with the patient often unaware that some of the conditions are hereditary[2].\"}\n]\n}\n\n"
    "Example Output 1:\n{\"coverage\": \"FULL_COVERAGE\", \"bullet_id\": 3}\n\n"
    "Example Reference Insight 2: \"The doctor asks the patient about their medical history\".\n\n"
    "Example Bullet Points 2:\n{\"bullets\": [\n"
    "    {\"bullet_id\": 1, \"text\": \"The patient often mention that they are worried about medication "
    "side-effect[12][14].\"},\n"
    "    {\"bullet_id\": 2, \"text\": \"The doctor and patient spend time going over symptoms [3][8], "
    "particularly the initial symptoms and the progression in the last few months[5].\"}\n]\n}\n\n"
    "Example Output 2:\n{\"coverage\": \"NO_COVERAGE\", \"bullet_id\": \"NA\"}\n\n"
    "Example Reference Insight 3: \"The doctor asks the patient about their medical history\".\n\n"
    "Example Bullet Points 3:\n{\"bullets\": [\n"
    "    {\"bullet_id\": 1, \"text\": \"The patient often mention that they are worried about medication "
    "side-effect[12][14].\"},\n"
    "    {\"bullet_id\": 2, \"text\": \"The doctor and patient catch up after a long time, with the patient "
    "mentioning feeling unwell for a while, and knowing of other family member's similar experiences[20].\"},\n"
    "    {\"bullet_id\": 3, \"text\": \"The doctor and patient spend time going over symptoms [3][8], "
    "particularly the initial symptoms and the progression in the last few months[5].\"}\n]\n}\n\n"
    "Example Output 3:\n{\"coverage\": \"PARTIAL_COVERAGE\", \"bullet_id\": 2}\n\n"
    "Now complete the task for the following insight and bullet points:\n\n"
    "Reference Insight:\n[[INSIGHT]]\n\nBullet Points:\n[[BULLETS]]\n\n\n"
    "Requirements:\n- Do not hallucinate that the insight is covered by the bullet points if it is not.\n"
    "- Your response should only be the JSON output in the format above, such that it can directly parsed "
    "by Python's json module. DO NOT OUTPUT ANY EXPLANATION OR ANYTHING THAT IS NOT THE JSON RESPONSE.\n"
)


def document_block(domain: str, number: int, text: str) -> str:
    """One document as populate_summaries.summarize lists it ("Conversation 3:\\n...\\n\\n")."""
    label = "Conversation" if domain == "conversation" else "Article"
    return f"{label} {number}:\n{text}\n\n"


def summarization_prompt(domain: str, *, n_documents: int, n_insights: int, topic: str,
                         participants: list[str], subtopic: str, query: str, documents: str,
                         no_document: bool = False) -> str:
    """The filled prompt; `documents` goes where the authors put the document list (the
    task type passes the context slot there)."""
    if domain == "conversation":
        template = NO_DOCUMENT_CONV if no_document else SUMMARIZATION_CONV
        return (template.replace("[N_conversations]", str(n_documents)).replace("[SCENARIO]", topic)
                .replace("[PARTICIPANTS]", ", ".join(participants)).replace("[CONVERSATIONS]", documents)
                .replace("[QUERY]", query).replace("[N_insights]", str(n_insights)))
    template = NO_DOCUMENT_NEWS if no_document else SUMMARIZATION_NEWS
    return (template.replace("[N_articles]", str(n_documents)).replace("[ARTICLES]", documents)
            .replace("[TOPIC]", topic).replace("[N_insights]", str(n_insights))
            .replace("[SUBTOPIC]", subtopic))


def bullets_json(bullets: list[str]) -> str:
    """The bullet list as populate_eval.evaluate_insights shows it (json.dumps, indent=1)."""
    return json.dumps({"bullets": [{"bullet_id": i + 1, "text": b} for i, b in enumerate(bullets)]}, indent=1)


def coverage_prompt(insight: str, bullets: list[str], template: str = EVAL_SUMMHAY) -> str:
    return template.replace("[[BULLETS]]", bullets_json(bullets)).replace("[[INSIGHT]]", insight)
