"""A run's reasoning settings checked against the model before any request, and the defaults
that make a thinking model's run go through: what the backend can do with them is its
`ReasoningControls`; what the run used is said on the console and recorded with the spec.

A setting the user gave that the model cannot honour (an effort for an API that takes a
budget, a budget for one that takes an effort, `--thinking off` for a model that cannot stop
thinking) is refused in one line naming the flag, the model and what to use instead. A
default is never refused: where the model's API cannot take the family's budget, the
thinking gets room in the request's token limit instead (`GenerationParams.reasoning_room`),
and the API's own effort is used (nothing sent)."""

from __future__ import annotations

from typing import Any, Callable

from lceval.engine._model_spec import ModelSpec
from lceval.engine._spec import TaskSpec, with_overrides
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, ReasoningControls
from lceval.reasoning import default_budget

ROOM_FIELD = "generation.reasoning_room"


def _name(model: ModelSpec) -> str:
    """The model without its options (an api_base is never echoed)."""
    return f"{model.scheme}:{model.model}"


def _who(model: ModelSpec, controls: ReasoningControls) -> str:
    return f"model '{_name(model)}'" + (f" ({controls.api})" if controls.api else "")


def _efforts(controls: ReasoningControls) -> str:
    return "|".join(controls.efforts or ("low", "medium", "high"))


def _check_given(g: dict[str, Any], controls: ReasoningControls, model: ModelSpec) -> None:
    """Refuse what the user set that the model cannot honour."""
    thinking, budget, effort = g.get("thinking"), g.get("reasoning_budget"), g.get("reasoning_effort")
    room = g.get("reasoning_room")
    who = _who(model, controls)
    # the model's own markers named: the user says it thinks, whatever its template or API says
    never = controls.thinks is False and not controls.switch and not model.reasoning.custom
    asked = [flag for flag, value in (("--thinking", thinking is True), ("--reasoning-budget", budget is not None),
                                      ("--reasoning-effort", effort is not None), (ROOM_FIELD, room is not None))
             if value]
    if asked and never:
        raise UserError(f"{who} does not think (no thinking markers or switch in its chat template, or its API "
                        f"says it does not reason): {asked[0]} has nothing to act on", field=asked[0],
                        hint="Drop the flag, or say the model thinks: name its markers with think_markers=OPEN|CLOSE "
                             "(a litellm: server model also takes reasoning=separate or reasoning=inline).")
    if thinking is False and controls.thinks is True and controls.switch is False:
        instead = (f"use --reasoning-effort {controls.efforts[0]} for the least thinking it does" if controls.efforts
                   else "drop --thinking off")
        raise UserError(f"{who} always thinks and its API has no switch to stop it: --thinking off cannot be honoured",
                        field="--thinking", hint=instead[0].upper() + instead[1:] + ".")
    if budget is not None and controls.budget is None:
        if controls.efforts:
            raise UserError(f"{who} takes a reasoning effort, not a thinking budget: --reasoning-budget {budget} has "
                            "no equivalent there", field="--reasoning-budget",
                            hint=f"Use --reasoning-effort {_efforts(controls)}; the tokens its request leaves for "
                                 f"thinking are --set {ROOM_FIELD}=N.")
        if controls.room is not None:
            raise UserError(f"{who} cannot be told to stop thinking after {budget} tokens: the server's chat API takes "
                            "no thinking budget", field="--reasoning-budget",
                            hint=f"Drop --reasoning-budget (the tokens its request leaves for thinking are --set "
                                 f"{ROOM_FIELD}=N), or run the model with vllm: or hf:, where lceval ends the "
                                 "thinking itself.")
        raise UserError(f"backend '{model.scheme}' can neither pass a thinking budget to the model nor end the "
                        "model's thinking itself (it does not continue an assistant message)",
                        field="--reasoning-budget",
                        hint="Drop --reasoning-budget (the model thinks as long as its answer's max_new_tokens "
                             "allows), or run the model with hf:, vllm: or llamacpp:.")
    if effort is not None and controls.efforts is not None and effort not in controls.efforts:
        if controls.efforts:
            hint = f"Use --reasoning-effort {_efforts(controls)}."
        elif controls.budget == "api":
            hint = "Use --reasoning-budget N: its API takes a thinking budget."
        else:
            hint = "Drop --reasoning-effort" + ("; --thinking on|off switches its thinking." if controls.switch else ".")
        what = "no reasoning effort" if not controls.efforts else f"the efforts {_efforts(controls)}, not '{effort}'"
        raise UserError(f"{who} takes {what}", field="--reasoning-effort", hint=hint)
    if room is not None and controls.room is None:
        raise UserError(f"{who} does not count its thinking in the answer's token limit, so there is no room to set",
                        field=ROOM_FIELD, hint="Use --reasoning-budget N for how long it may think.")


def _capped(tokens: int, window: int | None, source: str) -> tuple[int, str]:
    """A default never takes more than half the model's window (the window holds the
    context, the thinking and the answer)."""
    if window and tokens > window // 2:
        return window // 2, f"half its {window}-token window; {source} is {tokens:,}"
    return tokens, source


def thinking_settings(spec: TaskSpec, controls: ReasoningControls, window: int | None, model: ModelSpec,
                      say: Callable[[str], None]) -> TaskSpec:
    """`spec` with the run's reasoning settings checked against the model (`controls`) and a
    thinking model's defaults filled in: a thinking budget from its family's guidance where the
    budget is the engine's or required by the API (`--thinking on` for Claude), else room in
    the token limit where the API counts the thinking there. What was used is said (`say`)."""
    g = spec.data["generation"]
    _check_given(g, controls, model)
    thinking, budget, effort = g.get("thinking"), g.get("reasoning_budget"), g.get("reasoning_effort")
    will_think = thinking is not False and (controls.thinks is True or (thinking is True and controls.switch is True))
    if not will_think:
        return spec
    told: list[str] = []
    if budget is None and (controls.budget == "engine" or (controls.budget == "api" and not controls.thinks)):
        family = default_budget(model.model)
        if family is not None:
            budget, why = _capped(family, window, "its family's guidance")
            spec = with_overrides(spec, {"generation": {"reasoning_budget": budget}})
            told.append(f"reasoning budget {budget} tokens ({why}; --reasoning-budget to change), answer "
                        f"{spec.max_new_tokens} tokens")
    elif budget is None and controls.room is not None and g.get("reasoning_room") is None:
        room, why = _capped(controls.room, window, controls.room_source or "its family's guidance")
        spec = with_overrides(spec, {"generation": {"reasoning_room": room}})
        if controls.budget == "api":
            told.append("no thinking budget sent, so it thinks as its API decides (--reasoning-budget to cap it)")
        told.append(f"{room:,} tokens of room for its thinking beside the answer's {spec.max_new_tokens} ({why}; "
                    f"--set {ROOM_FIELD}=N to change)")
    if effort is None and controls.efforts and g.get("reasoning_budget") is None:
        told.insert(0, "effort: the provider's default, none sent (--reasoning-effort to choose)")
    if told:
        say(f"{spec.name}: {_name(model)} thinks: " + "; ".join(told))
    return spec


def expects_thinking(controls: ReasoningControls, model: ModelSpec) -> bool:
    """Whether the user declared the model thinks (a server's `reasoning=` option, markers of
    its own), so that answers with no thinking at all mean the declaration is wrong."""
    return controls.declared or (model.reasoning.split and model.reasoning.custom)


def controls_of(backend: ModelBackend) -> ReasoningControls:
    """The backend's `reasoning_controls()`; a third-party backend written before them, or one
    whose method fails to answer, is read from `thinks()` and its attributes."""
    try:
        controls = backend.reasoning_controls()
    except UserError:
        raise
    except Exception:  # noqa: BLE001 - an older plugin's backend: the defaults of the contract
        controls = ModelBackend.reasoning_controls(backend)
    return controls if isinstance(controls, ReasoningControls) else ReasoningControls(thinks=backend.thinks())
