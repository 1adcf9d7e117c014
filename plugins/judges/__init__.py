"""Generic judges, usable by any task whose samples have a question, an answer and a reference."""
