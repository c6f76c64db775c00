"""Background mode: responses whose loop runs after the request that created it returned.

The worker (:mod:`.worker`) runs the shared loop from a checkpoint, one action at a time,
checkpointing after each; the Step Functions state machine (``infra/statemachines``) or the local
runner (:mod:`.local`) calls it until the response ends. Events go to a log in the store
(:mod:`.log`) that clients replay and follow; tool calls are journaled (:mod:`.journal`); creating,
cancelling and ending runs is :mod:`.runs`. Nothing here is imported by a request that does not
use background mode, except the small seams the service holds (:mod:`.launcher`, :mod:`.log`,
:mod:`.records`).
"""

__all__: list[str] = []
