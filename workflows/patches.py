"""Every `workflow.patched` id the agent workflow asks, and the old path each keeps alive.

A patch lets runs recorded before a change replay the way they ran (docs/changing-
workflows.md). Each id here has two replay fixtures in tests/histories: one recorded with
the marker and one without it that reaches the same question
(tests/workflows/test_patch_sides.py). An old path may go once no run, open or kept for
time travel, was recorded without its marker.
"""

from __future__ import annotations

# Runs keep their stored data under the chain's identity (workflow id + first execution's
# run id). Old path: the workflow id is the store key (runs from before the identity).
RUN_IDENTITY = "run-identity"
# A reply cut short does not end a step or the final answer (asked only where one came).
# Old path: the cut reply was the step's end.
CUT_SHORT = "cut-short-replies-go-on"
# A tool that fails after its retries goes to the model as the tool's result.
# Old path: the run failed.
TOOL_ERRORS = "tool-errors-go-to-the-model"
# Runs record their agent at start (a local activity). Old path: runs from before agents
# resolve the `before-agents` agent when they first need it.
AGENT_RECORD = "agent-recorded-at-start"
# A cancel always takes hold: one that came before the run's story started (with the
# start, or during its local activity), or while an activity that finished anyway was in
# flight. Old path: recorded, then lost; the run went on to its next wait.
CANCEL_HOLDS = "cancel-holds"
# Search attributes are upserted only when the status or what the run waits for changes,
# with that moment's step: an upsert is a billable action, and one every step cost a step
# one action more than raw Temporal's. The live step is in the current details (the Web
# UI) and the queries. Old path: the step was upserted at every step.
STEP_WITH_STATUS = "step-published-with-status"
# Under `require_signed_decisions`, every change a person makes counts only when signed,
# and a decision's signature covers its tool, step and comment (workflows/signing.py, v2).
# Old path: v1, decisions and answers signed, other changes counted unsigned.
EVERY_CHANGE_SIGNED = "every-change-signed"
# A fork takes its parent's identity and policy from the parent itself (`fork_origin`).
# Old path: from the state the fork request carried.
FORK_CHECKED = "fork-checked-with-its-parent"
# The agent's declared policy is a floor a start request may only tighten: a request that
# loosens it is refused before any activity. Old path: the request's policy replaced the
# agent's, and its approvers the tools' declared ones.
POLICY_FLOOR = "agent-policy-is-a-floor"
# A fork's carried state must be its parent's own at the fork's moment, as the parent's
# history has it (`parent_state_at` replays it): else the fork is refused before it copies
# or runs anything. Old path: the carried state, with the parent's identity and policy.
FORK_RECORD_CHECKED = "fork-state-checked-with-its-parents-record"

# People's inputs are checked by this release's rules: a decision or answer ends with its
# request's deadline, an answer comes from someone the policy lets answer, a sender holds
# at most a few places in a conversation's queue and waiters, a wait for a reply is signed
# like a message. Old path: the rules the run was recorded under (asked as the run is
# built, so every handler, even one run before the run's code, answers the same on replay).
PEOPLE_CHECKED = "people-inputs-checked"

# A new run takes the new path of the four patches every run's opening asks (run-identity,
# agent-recorded-at-start, step-published-with-status, people-inputs-checked) on this one
# marker: each marker is also a search-attribute write (the SDK's TemporalChangeVersion),
# so a run opened with four markers and five writes, and opens with one and two. Asked
# first, as the run is built. Old path: runs recorded before it (no marker: it answers no
# on replay) ask the four one by one, as they did.
OPENING = "opening-in-one-marker"

# A sub-agent's spend while it runs is read from its own run (the `child_spend` local
# activity, after it reports); its start input and its reports carry no token, and what
# a report says is never taken. Asked as a delegation starts. Old path: the child was
# given a token in its start input, and a report carrying it was taken as the spend.
CHILD_SPEND_READ = "child-spend-read-from-the-child"

# A continued run and a child are admitted from Temporal's record of how they began
# (workflows/admission.py, the `run_origin` activity): a carried state only if the previous
# run's own continue-as-new named this run with this input, a parent only if Temporal shows
# it on this queue. Old path: the carried state and the parent were taken as Temporal's
# start event named them (the activities' caller check checked the chain later).
ADMITTED = "admitted-from-the-record"

# An agent's declared budget and limits are floors a start request may only tighten
# (workflows/floors.py): a request above them is refused, a sub-agent takes the tighter of
# its parent's and its own. Asked only where the request gives a budget or limits. Old
# path: a request's budget or limits replaced the agent's.
LIMITS_FLOOR = "budget-and-limits-are-floors"

# Decisions and answers count only signed v3, bound to the moment their signer saw, and a
# change signed for a run above counts in a sub-agent only where a parent passes it on
# (pause, resume, a budget): workflows/signing.py `versions_taken`, workflows/signed_changes
# .py. Asked where a run's policy requires signatures. Old path: v2, decisions and answers
# bound to no moment, and any change signed for a run above counted.
DECISIONS_BOUND = "decisions-bound-to-their-moment"

# Every id above, read from this module itself: one written here is listed, none twice.
ALL = tuple(value for name, value in list(globals().items()) if name.isupper() and name != "ALL")
