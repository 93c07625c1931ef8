"""A worker whose store is its own serves that store's queue too (activities/store_queue.py):
a second Temporal worker beside the main one, in the same process, polling
`<queue>@<store id>` for the store-bound activities only (the workflow's
activity_options.STORE_BOUND), with the very activity objects the main worker runs, so
one set of stores serves both.

- **The stamp.** A store-bound activity that reached this worker through the main queue
  (the run does not know its store's queue yet) names this store's queue in its result
  (activity_io.STORE_QUEUE_FIELD): the run learns where its store is and sends its later
  store-bound activities there. One reached through the store's queue is not stamped:
  the run knows already, and its history per step stays what it was.
- **The caller check.** The store's queue is this deployment's too: a call on it is
  checked as one on the main queue (worker/callers.py), so a workflow of anyone's on
  another queue is refused there as it is on the main one.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import temporalio.worker
from pydantic import BaseModel
from temporalio import activity
from temporalio.worker import Worker

from durable_agents.worker.callers import CallerCheck
from durable_agents.workflows.activity_io import STORE_QUEUE_FIELD
from durable_agents.workflows.activity_options import STORE_BOUND


class StoreQueueStamp(temporalio.worker.Interceptor):
    """Names the store's queue in a store-bound activity's result that came through
    the main queue."""

    def __init__(self, store_queue: str) -> None:
        self.store_queue = store_queue

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        return _Stamped(next, self.store_queue)


class _Stamped(temporalio.worker.ActivityInboundInterceptor):
    def __init__(self, next: temporalio.worker.ActivityInboundInterceptor, store_queue: str):
        super().__init__(next)
        self.store_queue = store_queue

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        result = await self.next.execute_activity(input)
        info = activity.info()
        if (
            info.activity_type in STORE_BOUND
            and not info.is_local
            and info.task_queue != self.store_queue
            and isinstance(result, BaseModel)
            and STORE_QUEUE_FIELD in type(result).model_fields
        ):
            return result.model_copy(update={STORE_QUEUE_FIELD: self.store_queue})
        return result


class StoreQueueCheck(CallerCheck):
    """The caller check of the main queue, for calls on the store's queue."""

    def __init__(self, of: CallerCheck, task_queue: str, store_queue: str) -> None:
        super().__init__(of.client, of.admits)
        self.task_queue = task_queue
        self.store_queue = store_queue

    async def refusal(self, info: activity.Info, args: Any) -> str | None:
        if info.task_queue == self.store_queue:
            info = dataclasses.replace(info, task_queue=self.task_queue)
        return await super().refusal(info, args)


def store_worker(main: Worker, store_queue: str) -> Worker:
    """The worker of the store's queue, made from the main worker as our plugin made it:
    its store-bound activities (the same objects: one set of stores), its interceptors
    (tracing, the stamp) with the caller check of the main queue, its build and grace."""
    made = main.config(active_config=True)
    interceptors = [
        StoreQueueCheck(i, main.task_queue, store_queue) if isinstance(i, CallerCheck) else i
        for i in made.get("interceptors", ())
    ]
    return Worker(
        made["client"],
        task_queue=store_queue,
        activities=[fn for fn in made["activities"] if _name(fn) in STORE_BOUND],
        interceptors=interceptors,
        graceful_shutdown_timeout=made.get("graceful_shutdown_timeout", timedelta()),
        deployment_config=made.get("deployment_config"),
    )


def _name(fn: Any) -> str | None:
    definition = activity._Definition.from_callable(fn)
    return definition.name if definition is not None else None
