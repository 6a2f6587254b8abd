"""swemill.replay: heterogeneous teachers act on imported session states; where they disagree
with the original agent (or with each other) there is a preference pair.

``run_replay(store, run_id, ReplayConfig(teachers=[...], max_usd=...))`` is the whole stage;
its pieces are the teacher pool (:mod:`.teachers`), realtime replay under the run's budget
(:mod:`.realtime`), Bedrock batch inference (:mod:`.bedrock_batch`, :mod:`.batch_plan`,
:mod:`.batch_format`, :mod:`.batch_results`) and preference extraction (:mod:`.extract`).
Importing the package loads no provider SDK.
"""

from swemill.replay.batch_plan import BatchQuotas, batch_vs_realtime, plan_shards
from swemill.replay.extract import PolicyJudge, extract_dpo_pairs, extract_run
from swemill.replay.replies import REPLIES_STAGE, TeacherReply
from swemill.replay.run import ReplayClients, ReplayConfig, ReplaySummary, run_replay
from swemill.replay.teachers import TeacherPool, TeacherSpec, parse_teacher, parse_teachers

__all__ = [
    "REPLIES_STAGE",
    "BatchQuotas",
    "PolicyJudge",
    "ReplayClients",
    "ReplayConfig",
    "ReplaySummary",
    "TeacherPool",
    "TeacherReply",
    "TeacherSpec",
    "batch_vs_realtime",
    "extract_dpo_pairs",
    "extract_run",
    "parse_teacher",
    "parse_teachers",
    "plan_shards",
    "run_replay",
]
