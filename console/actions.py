"""What a person does from the console: each a POST with the CSRF token, sent to the run
through the same updates and signals as the CLI, under the signed-in user's name.

A name in the form is never read: `by` is the signed-in user. Decisions and answers are
signed with the console's key (workflows/signing.py), so a run whose policy requires
signed decisions counts them, and a decision typed into Temporal directly does not.
A refusal (the policy's approvers, the workflow's validators) comes back as the page's
message, with nothing changed.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from durable_agents.console.identity import CSRF_FIELD
from durable_agents.console.web import (
    Console,
    PageError,
    console_of,
    read_form,
    run_state,
    signed_in,
)
from durable_agents.control import runs, timeline
from durable_agents.control.errors import one_line
from durable_agents.control.runs import RunError
from durable_agents.workflows.contract_base import BudgetLimits
from durable_agents.workflows.people_inputs import (
    Actor,
    Answer,
    BudgetRaise,
    DecideRequest,
    StatePatch,
)
from durable_agents.workflows.records import BUDGET_REQUEST
from durable_agents.workflows.run_summary import progress_line
from durable_agents.workflows.state import RunState
from durable_agents.workflows.tools import ASK_HUMAN

COMMENT = Field(default="", max_length=2000)


class Form(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class DecideForm(Form):
    request_id: str = Field(min_length=1, max_length=200)
    decision: Literal["approve", "reject"]
    comment: str = COMMENT


class AnswerForm(Form):
    question_id: str = Field(min_length=1, max_length=200)
    answer: str = Field(min_length=1, max_length=4000)


class ReasonForm(Form):
    reason: str = COMMENT


class EditForm(Form):
    goal: str = Field(default="", max_length=4000)
    # One step per line; empty: the steps stay as they are.
    pending_steps: str = Field(default="", max_length=100_000)


class BudgetForm(BudgetLimits):
    """Empty fields: that limit stays as it is. The bounds are the budget's own."""

    model_config = Form.model_config
    comment: str = COMMENT

    @field_validator("usd", "tokens", "tool_calls", "seconds", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class MomentForm(Form):
    moment: int = Field(ge=1, le=10**9)


F = TypeVar("F", bound=BaseModel)


def parse_form(model: type[F], fields: dict[str, str]) -> F:
    try:
        return model.model_validate(fields)
    except ValidationError as err:
        raise PageError(422, f"the form is not valid: {one_line(err)}") from None


async def acting(request: Request, run_id: str) -> tuple[Console, str, dict[str, str], RunState]:
    """The signed-in user, the form (CSRF checked first) and the run's state."""
    user = signed_in(request)
    console = console_of(request)
    fields = await read_form(request)
    if not console.identity.csrf_ok(request, fields.get(CSRF_FIELD)):
        raise PageError(403, "the form is stale or forged (CSRF token): reload and retry")
    return console, user, fields, await run_state(console, run_id)


def done(request: Request, run_id: str, message: str, location: str | None = None) -> Response:
    """Scripted pages get JSON; a plain form post goes back to the run with the message."""
    where = location or f"/runs/{run_id}"
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"ok": True, "message": message, "location": where})
    console_of(request).identity.flash(request, message)
    response = RedirectResponse(where, status_code=303)
    console_of(request).identity.keep(request, response)
    return response


def refused(err: RunError) -> PageError:
    return PageError(409, str(err).removeprefix("refused: "))


def register(app: FastAPI) -> None:
    @app.post("/runs/{run_id}/decide")
    async def decide(request: Request, run_id: str) -> Response:
        console, user, fields, state = await acting(request, run_id)
        form = parse_form(DecideForm, fields)
        pending = next(
            (a for a in state.pending_approvals if a.request_id == form.request_id), None
        )
        if pending is None:
            raise PageError(409, f"no pending approval {form.request_id!r} in {run_id}")
        if not state.policy.may_decide(pending.tool, user, pending.escalated):
            raise PageError(403, f"{user} may not decide {pending.tool} requests in this run")
        request_ = DecideRequest(
            request_id=form.request_id,
            approve=form.decision == "approve",
            by=user,
            comment=form.comment,
        )
        try:
            # Signed from the state just read (no second query to learn the arguments),
            # bound to the run's latest moment: a copy counts in this timeline only.
            moment = await runs.latest_moment(console.client, run_id)
            signed = runs.signed_decision(state, request_, console.signer, moment)
            said = await runs.decide(console.client, run_id, signed)
        except RunError as err:
            raise refused(err) from None
        return done(request, run_id, said)

    @app.post("/runs/{run_id}/answer")
    async def answer(request: Request, run_id: str) -> Response:
        console, user, fields, state = await acting(request, run_id)
        if not state.policy.may_decide(ASK_HUMAN, user):
            raise PageError(403, f"{user} may not answer this run's questions")
        form = parse_form(AnswerForm, fields)
        reply = Answer(question_id=form.question_id, answer=form.answer, by=user)
        try:
            moment = await runs.latest_moment(console.client, run_id)
            signed = runs.signed_answer(state, reply, console.signer, moment)
            said = await runs.answer(console.client, run_id, signed)
        except RunError as err:
            raise refused(err) from None
        return done(request, run_id, said)

    def _actor_route(verb: Literal["pause", "resume", "cancel"]) -> None:
        async def act(request: Request, run_id: str) -> Response:
            console, user, fields, state = await acting(request, run_id)
            form = parse_form(ReasonForm, fields)
            if state.status.is_closed:
                raise PageError(409, f"the run is {state.status.value}; it takes no more actions")
            try:
                await getattr(runs, verb)(
                    console.client, run_id, Actor(by=user, reason=form.reason), console.signer
                )
            except RunError as err:
                raise refused(err) from None
            return done(request, run_id, f"{verb} sent by {user}")

        app.post(f"/runs/{{run_id}}/{verb}", name=verb)(act)

    verbs: tuple[Literal["pause", "resume", "cancel"], ...] = ("pause", "resume", "cancel")
    for verb in verbs:
        _actor_route(verb)

    @app.post("/runs/{run_id}/budget")
    async def budget(request: Request, run_id: str) -> Response:
        console, user, fields, state = await acting(request, run_id)
        form = parse_form(BudgetForm, fields)
        if not state.policy.may_decide(BUDGET_REQUEST, user):
            raise PageError(403, f"{user} may not change this run's budget")
        limits = form.limits()
        try:
            new = await runs.raise_budget(
                console.client,
                run_id,
                BudgetRaise(by=user, comment=form.comment, **limits),
                console.signer,
            )
        except RunError as err:
            raise refused(err) from None
        return done(request, run_id, f"budget set by {user}: {new.model_dump(exclude_none=True)}")

    @app.post("/runs/{run_id}/edit")
    async def edit(request: Request, run_id: str) -> Response:
        console, user, fields, _ = await acting(request, run_id)
        form = parse_form(EditForm, fields)
        steps = [line.strip() for line in form.pending_steps.splitlines() if line.strip()]
        try:
            patch = StatePatch(by=user, goal=form.goal or None, pending_steps=steps or None)
        except ValidationError as err:
            raise PageError(422, f"the edit is not valid: {one_line(err)}") from None
        try:
            edited = await runs.edit(console.client, run_id, patch, console.signer)
        except RunError as err:
            raise refused(err) from None
        return done(request, run_id, f"edited by {user}: {progress_line(edited)}")

    @app.post("/runs/{run_id}/fork")
    async def fork(request: Request, run_id: str) -> Response:
        console, user, fields, _ = await acting(request, run_id)
        form = parse_form(MomentForm, fields)
        try:
            started = await timeline.fork(
                console.client,
                console.settings,
                run_id,
                form.moment,
                by=user,
                signer=console.signer,
            )
        except RunError as err:
            raise refused(err) from None
        where = f"/runs/{started.run_id}"
        return done(request, run_id, f"forked by {user} from moment {form.moment}", where)

    @app.post("/runs/{run_id}/rewind")
    async def rewind(request: Request, run_id: str) -> Response:
        console, user, fields, _ = await acting(request, run_id)
        form = parse_form(MomentForm, fields)
        try:
            await timeline.rewind(
                console.client, run_id, form.moment, by=user, signer=console.signer
            )
        except RunError as err:
            raise refused(err) from None
        return done(request, run_id, f"rewound by {user} to moment {form.moment}")
