"""Which RPCs each of the cluster's credentials may call: BuildGrid 0.4.4's per-instance ACL (`acl-config`).

BuildGrid checks every instanced RPC against this file (buildgrid/server/auth/manager.py `_check_acls`): the
request name is the servicer method's name, the JWT's `sub` claim is the subject (a regex, `re.match`ed), an
instance the file does not name refuses everything, and a refusal is UNAUTHENTICATED."""

from __future__ import annotations

import re
from enum import Enum
from typing import assert_never

import yaml

from goma_ext.cluster.tokens import Role


class Rpc(Enum):
    """The instanced RPCs of the services the cluster enables (`!execution` brings Execution, Operations and Bots),
    by the method names BuildGrid 0.4.4 authorizes; the file each is defined in, under buildgrid/server/."""

    # bots/service.py (google.devtools.remoteworkers.v1test2.Bots)
    CREATE_BOT_SESSION = "CreateBotSession"
    UPDATE_BOT_SESSION = "UpdateBotSession"
    POST_BOT_EVENT_TEMP = "PostBotEventTemp"
    # execution/service.py
    EXECUTE = "Execute"
    WAIT_EXECUTION = "WaitExecution"
    # operations/service.py (google.longrunning.Operations)
    GET_OPERATION = "GetOperation"
    LIST_OPERATIONS = "ListOperations"
    CANCEL_OPERATION = "CancelOperation"
    DELETE_OPERATION = "DeleteOperation"
    # actioncache/service.py
    GET_ACTION_RESULT = "GetActionResult"
    UPDATE_ACTION_RESULT = "UpdateActionResult"
    # cas/service.py: ContentAddressableStorage, then ByteStream
    FIND_MISSING_BLOBS = "FindMissingBlobs"
    BATCH_UPDATE_BLOBS = "BatchUpdateBlobs"
    BATCH_READ_BLOBS = "BatchReadBlobs"
    GET_TREE = "GetTree"
    READ = "Read"
    WRITE = "Write"
    QUERY_WRITE_STATUS = "QueryWriteStatus"
    # capabilities/service.py
    GET_CAPABILITIES = "GetCapabilities"


_BLOBS = frozenset({Rpc.FIND_MISSING_BLOBS, Rpc.BATCH_UPDATE_BLOBS, Rpc.BATCH_READ_BLOBS, Rpc.GET_TREE, Rpc.READ,
                    Rpc.WRITE, Rpc.QUERY_WRITE_STATUS, Rpc.GET_CAPABILITIES})
_BOTS = frozenset({Rpc.CREATE_BOT_SESSION, Rpc.UPDATE_BOT_SESSION, Rpc.POST_BOT_EVENT_TEMP})
# What goma-ext's client calls (goma_ext/reapi/execution.py), plus GetOperation. Not ListOperations (it would
# show a client everyone's actions) nor Cancel/DeleteOperation (other users' builds): the client needs neither.
_CLIENT = _BLOBS | {Rpc.EXECUTE, Rpc.WAIT_EXECUTION, Rpc.GET_OPERATION, Rpc.GET_ACTION_RESULT}


def grants(role: Role) -> frozenset[Rpc]:
    """What ROLE may call. Workers never write the action cache themselves: BuildGrid's scheduler stores a
    completed lease's result (scheduler/impl.py), and they never look results up. Nobody but the cache writer
    calls UpdateActionResult, so the remote cache's results come from workers and from that credential only."""
    if role is Role.WORKER:
        return _BLOBS | _BOTS
    if role is Role.CLIENT:
        return _CLIENT
    if role is Role.CACHE_WRITER:
        return _CLIENT | {Rpc.UPDATE_ACTION_RESULT}
    assert_never(role)


def subject_pattern(role: Role) -> str:
    """The regex BuildGrid `re.match`es against a token's `sub`: the whole subject, nothing longer (`\\Z`, not `$`,
    which also matches before a trailing newline)."""
    return f"{re.escape(role.value)}\\Z"


def render(instance: str) -> str:
    """The ACL file for one instance: one entry per role, RPCs sorted (deterministic output)."""
    allow = [{"subject": subject_pattern(role), "requests": sorted(r.value for r in grants(role))} for role in Role]
    return yaml.safe_dump({instance: {"allow": allow}}, sort_keys=False)
