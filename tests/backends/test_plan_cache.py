"""The plan cache (backends/plan_cache.py): a hit is verified, anything else is rebuilt, the folder is capped.

The cache's files are real; the cuDNN frontend that serializes into it cannot run here (no NVIDIA GPU), so
the store/restore glue (backends/cudnn_plan_store.py) is driven by a stand-in frontend whose graphs
serialize to bytes and fail on bytes they did not write, as cuDNN's do."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from hipdnn_trace.backends import cudnn_plan_store, plan_cache
from hipdnn_trace.backends.base import Engine
from hipdnn_trace.backends.plan_cache import MAGIC, PlanCache
from hipdnn_trace.bench.config import Config
from hipdnn_trace.errors import UserError
from hipdnn_trace.runs import plan as run_plan
from hipdnn_trace.runs.request import RunRequest

KEY = {"backend": "cudnn", "translation": "abc", "engine": None, "cudnn": 91900, "gpu": "NVIDIA H200"}
META = {"index": 2, "name": "eng0_k1", "knobs": {"engine_id": 0}, "workspace_bytes": 4096}


def test_a_stored_plan_comes_back_whole_and_touches_its_entry(tmp_path):
    cache = PlanCache(tmp_path)
    assert cache.get(KEY).plan is None and cache.get(KEY).note is None   # a miss says nothing
    assert cache.put(KEY, b"\x00plan\xffbytes", META) is None
    os.utime(cache.path(KEY), (1, 1))
    found = cache.get(KEY)
    assert found.plan is not None and found.plan.payload == b"\x00plan\xffbytes" and found.plan.meta == META
    assert cache.path(KEY).stat().st_mtime > 1   # used now: trimmed last


@pytest.mark.parametrize("spoil, why", [
    (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "checksum"),   # one bit of the plan
    (lambda data: data[:-3], "bytes of plan"),                      # cut short
    (lambda data: data.replace(MAGIC, b"something else\n"), "not a plan-cache entry"),
    (lambda data: data[:len(MAGIC) + 5], "cut short"),              # the header itself cut
    (lambda data: MAGIC + b"{not json\n" + b"x", "not JSON"),
])
def test_a_damaged_entry_is_removed_and_the_plan_built_again(tmp_path, spoil, why):
    cache = PlanCache(tmp_path)
    cache.put(KEY, b"plan-bytes" * 10, META)
    path = cache.path(KEY)
    path.write_bytes(spoil(path.read_bytes()))
    found = cache.get(KEY)
    assert found.plan is None and why in found.note and "built again" in found.note
    assert not path.exists()
    assert cache.put(KEY, b"plan-bytes" * 10, META) is None and cache.get(KEY).plan is not None   # rebuilt, stored


def test_an_entry_of_another_key_under_this_name_is_never_used(tmp_path):
    cache = PlanCache(tmp_path)
    other = {**KEY, "cudnn": 91800}   # the same graph built by another cuDNN
    cache.put(other, b"old library's plan", META)
    os.rename(cache.path(other), cache.path(KEY))
    found = cache.get(KEY)
    assert found.plan is None and "another key" in found.note


def test_a_fifo_planted_as_an_entry_is_refused_without_blocking(tmp_path):
    cache = PlanCache(tmp_path)
    os.mkfifo(cache.path(KEY))
    found = cache.get(KEY)
    assert found.plan is None and "not used" in found.note and not os.path.lexists(cache.path(KEY))


def test_the_folder_is_trimmed_least_recently_used_first(tmp_path):
    cache = PlanCache(tmp_path, max_bytes=4000)   # three entries of ~1.1 kB fit, four do not
    keys = [{**KEY, "translation": str(i)} for i in range(3)]
    for i, key in enumerate(keys):
        cache.put(key, bytes(900), META)
        os.utime(cache.path(key), (100 + i, 100 + i))
    cache.get(keys[0])                                   # the oldest is used again
    cache.put({**KEY, "translation": "new"}, bytes(900), META)
    left = {p.name for p in tmp_path.iterdir()}
    assert cache.path(keys[1]).name not in left          # least recently used: gone
    assert {cache.path(keys[0]).name, cache.path(keys[2]).name} <= left
    assert PlanCache(tmp_path, max_bytes=10).put(KEY, bytes(100), META).startswith("plan not cached")


def test_an_unwritable_folder_is_a_note_not_a_failure(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    note = PlanCache(blocker / "plans").put(KEY, b"p", META)
    assert note is not None and note.startswith("plan not cached in")


# ----------------------------------------------------------------- the cuDNN glue, on a stand-in frontend

class StandInGraph:
    """What cuDNN's pygraph does for the cache: serialize a built plan, restore it or raise."""

    def __init__(self, plan: str = "", workspace: int = 4096) -> None:
        self.plan, self.workspace = plan, workspace

    def serialize(self) -> list[int]:
        return list(json.dumps({"plan": self.plan, "workspace": self.workspace}).encode())

    def deserialize(self, handle, data: bytes) -> None:
        state = json.loads(bytes(data))   # raises on bytes it did not write, as cuDNN does
        self.plan, self.workspace = state["plan"], state["workspace"]

    def get_workspace_size(self) -> int:
        return self.workspace


class StandInCudnn:
    @staticmethod
    def pygraph(handle=None) -> StandInGraph:
        return StandInGraph()


def test_stand_in_cudnn_plan_round_trips_through_the_cache(tmp_path):
    cache, engine = PlanCache(tmp_path), Engine(index=2, name="eng0_k1", knobs={"engine_id": 0}, workspace_bytes=4096)
    assert cudnn_plan_store.restore(StandInCudnn, cache, KEY, handle=1) is None   # a miss
    assert cudnn_plan_store.store(cache, KEY, StandInGraph("eng0_k1"), engine, ("TENSOR_CORE",)) is None
    restored, again = cudnn_plan_store.restore(StandInCudnn, cache, KEY, handle=1)
    assert restored.graph.plan == "eng0_k1" and restored.deselected == ("TENSOR_CORE",)
    assert again == engine


def test_stand_in_cudnn_refusing_a_cached_payload_means_a_build(tmp_path):
    cache = PlanCache(tmp_path)
    cache.put(KEY, b"bytes cuDNN cannot read", META)   # whole and checksummed, but not a plan
    note = cudnn_plan_store.restore(StandInCudnn, cache, KEY, handle=1)
    assert isinstance(note, str) and "not restored by cuDNN" in note and not cache.path(KEY).exists()


def test_stand_in_cudnn_plan_restored_with_another_workspace_is_rebuilt(tmp_path):
    cache = PlanCache(tmp_path)
    engine = Engine(index=0, name="p", workspace_bytes=1024)
    cudnn_plan_store.store(cache, KEY, StandInGraph("p", workspace=2048), engine, ())
    note = cudnn_plan_store.restore(StandInCudnn, cache, KEY, handle=1)
    assert isinstance(note, str) and "2048-byte workspace, 1024 when built" in note


def test_a_frontend_that_cannot_serialize_leaves_a_note(tmp_path):
    class NoSerialize:
        def serialize(self):
            raise RuntimeError("serialization needs a built plan")

    note = cudnn_plan_store.store(PlanCache(tmp_path), KEY, NoSerialize(), Engine(index=0, name="p"), ())
    assert note.startswith("plan not cached: cuDNN could not serialize it")


# ----------------------------------------------------------------- --plan-cache

def _configs(backend: str) -> list[Config]:
    return [Config(backend, backend, None, None)]


def test_only_a_backend_that_keeps_plans_gets_a_cache(tmp_path):
    assert run_plan.plan_cache(RunRequest(plan_cache=str(tmp_path)), _configs("reference")) is None
    cache = run_plan.plan_cache(RunRequest(plan_cache=str(tmp_path), plan_cache_max=0.5), _configs("cudnn"))
    assert cache == PlanCache(tmp_path, 2**29)
    assert run_plan.plan_cache(RunRequest(plan_cache="none"), _configs("cudnn")) is None
    options = run_plan.with_plan_cache(run_plan.timing_options(RunRequest()), cache)
    assert options.extra[plan_cache.OPTION] is cache


def test_auto_lives_under_xdg_cache_home_and_steps_aside_when_unwritable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert run_plan.plan_cache(RunRequest(), _configs("cudnn")).folder == tmp_path / "hipdnn-trace" / "plans"
    (tmp_path / "ro").write_text("a file, not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ro"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_plan.plan_cache(RunRequest(), _configs("cudnn")) is None
    assert any("plans are built every run" in str(w.message) for w in caught)
    with pytest.raises(UserError, match="--plan-cache"):   # a folder the user named: one line, exit 1
        run_plan.plan_cache(RunRequest(plan_cache=str(tmp_path / "ro" / "x")), _configs("cudnn"))


def test_no_plan_cache_flag_means_none(tmp_path):
    from hipdnn_trace.commands.repro_flags import run_subparser

    parser = run_subparser()
    assert parser.parse_args(["g.json", "--no-plan-cache"]).plan_cache == "none"
    assert parser.parse_args(["g.json"]).plan_cache == "auto"
    assert parser.parse_args(["g.json", "--plan-cache", str(tmp_path)]).plan_cache == str(tmp_path)
    assert parser.parse_args(["g.json", "--plan-cache-max", "0.25"]).plan_cache_max == 0.25


def test_mocked_hipdnn_engine_cache_follows_the_plan_cache_unless_the_user_set_it(tmp_path):
    """No AMD GPU here: only the variables the hipDNN session exports before its handle are checked."""
    cache = PlanCache(tmp_path)
    assert plan_cache.hipdnn_cache_env({plan_cache.OPTION: cache}, {}) == {"HIPDNN_CACHE_DIR": str(tmp_path / "hipdnn")}
    assert plan_cache.hipdnn_cache_env({plan_cache.OFF_OPTION: True}, {}) == {"HIPDNN_DISABLE_CACHE": "1"}
    assert plan_cache.hipdnn_cache_env({plan_cache.OPTION: cache}, {"HIPDNN_CACHE_DIR": "/mine"}) == {}
    assert plan_cache.hipdnn_cache_env({}, {}) == {}
    off = run_plan.with_plan_cache(run_plan.timing_options(RunRequest()), None, off=True)
    assert off.extra == {plan_cache.OFF_OPTION: True}
