"""A plugin that fails halfway: its first hook registers a backend, its second raises. lceval
must keep nothing of it."""

from lceval import hookimpl


@hookimpl
def register_models(register):
    register("demo-half", lambda model, options: None)


@hookimpl
def register_retrievers(register):
    raise RuntimeError("the retriever index is missing")
