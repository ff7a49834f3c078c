"""Typed job messages (harness/protocol/messages.py, replies.py): every request and reply
round-trips through its wire form (and the tensor codec), and a field that is missing, of the
wrong type or out of range is refused with an error that names the message and the field,
both when decoded directly and through the real driver path (a worker's result file, as bytes,
becoming a JobOutcome)."""
from __future__ import annotations

import json

import pytest
import torch

from kernelevolve.harness.driver.build_service import BuildService
from kernelevolve.harness.driver.pool import Limits
from kernelevolve.harness.protocol import codec as wire
from kernelevolve.harness.protocol.messages import (CaseSpec, CheckJob, Containment,
                                                    FingerprintJob, JobRequest, MachineJob,
                                                    MeasureJob, MessageError, ReferenceJob,
                                                    params_from_wire)
from kernelevolve.harness.protocol.replies import (CheckCase, CheckReply, Failed,
                                                   FingerprintReply, MachineReply, MeasureCase,
                                                   MeasureReply, ReferenceCase, ReferenceReply,
                                                   reply_from_wire)
from kernelevolve.plugins import get_platform
from scripted_worker import ScriptedWorker, server_source

CASES = (CaseSpec("small", 1.0, {"N": 4}), CaseSpec("odd", 0.5, {"N": 7}, held_out=True))
SEEDS = {"small": (1, 2), "odd": (3, 4)}
RUN = dict(problem="p.py", problem_source="x = 1\n", candidate="c.py", init_seed=9,
           cases=CASES, seeds=SEEDS, filter_profile="jit", interpreted=True)


def requests():
    return [FingerprintJob(), MachineJob(syscall_filter=False),
            ReferenceJob(**RUN, count_cost=True),
            CheckJob(**RUN, neuter_seeds={"small": 5, "odd": 6}),
            MeasureJob(**RUN, timing_seeds={"small": (7, 8, 9)}, timing={"min_reps": 5},
                       baseline="compile", measurement="inprocess")]


def t(*values):
    return tuple(torch.tensor(v) for v in values)


def replies():
    ref = ReferenceCase(outputs=(t([1.0, 2.0]), t([3.0, 4.0])), digests=("a", "b"),
                        noise=((0.1,), (None,)), ops=("aten::mm",),
                        decomposed_ops=("aten::add",), cost={"bytes": 10})
    check = CheckCase(outputs=(t([1.0]),), repeats=(t([1.0]),), launches=({"cpp": 1},),
                      ops=(), digests=("a",), neutered={"outputs": t([0.0])},
                      neuter_digest="n")
    measure = MeasureCase(ref_ms=(1.0, 2.0), cand_ms=(0.5, 0.6), loop_s=1.0,
                          compile_ms=(0.7, 0.8), calls_per_batch=4,
                          samples=({"call": 0, "batch": 0},), cpu={"outside_s": 0.0},
                          threads=2, details={"profile_unavailable": "no perf"})
    return [("fingerprint", FingerprintReply({"cpu": "x"})), ("machine", MachineReply({"bw": 1})),
            ("reference", ReferenceReply({"small": ref, "odd": ReferenceCase(skipped="why")})),
            ("check", CheckReply({"small": check}, ("/lib/x.so",))),
            ("measure", MeasureReply({"small": measure}, protocol="outside")),
            ("check", Failed("integrity", "it cheated", case="small"))]


def same(a, b) -> bool:
    """Equal wire forms, tensors compared by value."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(
            same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("params", requests(), ids=lambda p: p.job)
def test_every_request_round_trips_through_json(params):
    request = JobRequest(params=params, platform="cpu", threads=2,
                         stage_timeouts={"load": 30.0, "run": 12.5},
                         helpers={"ke_warm_omp": {"path": "/x.so", "sha256": "00"}},
                         containment=Containment(profile="device", devices=("/dev/x",),
                                                 readable=("/usr",)))
    back = JobRequest.from_wire(json.loads(json.dumps(request.to_wire())))
    assert back == request and type(back.params) is type(params)
    assert params_from_wire(params.job, json.loads(json.dumps(params.to_wire()))) == params


@pytest.mark.parametrize("job, reply", replies(), ids=lambda x: getattr(x, "__name__", None))
def test_every_reply_round_trips_through_the_tensor_codec(job, reply):
    back = reply_from_wire(job, wire.decode(wire.encode(reply.to_wire())))
    assert type(back) is type(reply)
    assert same(back.to_wire(), reply.to_wire())


def test_a_reference_whose_float64_twin_overflowed_keeps_its_infinite_noise():
    """tests/problems/synth_ops_rounding.py: the float64 re-run of a reference that reaches
    float32's edge gives inf rounding noise; refusing it made the reference job 'malformed'."""
    ref = ReferenceCase(outputs=(t([1.0, 2.0]),), digests=("a",),
                        noise=((float("inf"), float("nan"), 0.5),))
    back = reply_from_wire("reference", wire.decode(wire.encode(
        ReferenceReply({"small": ref}).to_wire())))
    assert back.cases["small"].noise == ((float("inf"), None, 0.5),)
    with pytest.raises(MessageError, match=r"noise\[0\]\[0\]"):
        reply_from_wire("reference", wire.decode(wire.encode(
            ReferenceReply({"small": ReferenceCase(outputs=(t([1.0]),), digests=("a",),
                                                   noise=((-1.0,),))}).to_wire())))


def check_wire():
    return replies()[3][1].to_wire()


BAD_REQUESTS = [
    (lambda d: d["params"].update(seeds={"small": [1, -4]}), "JobRequest.params.seeds['small'][1]"),
    (lambda d: d["params"].update(init_seed="9"), "JobRequest.params.init_seed"),
    (lambda d: d["params"].pop("cases"), "JobRequest.params.cases: missing"),
    (lambda d: d["params"]["cases"][0].update(weight=-1), "JobRequest.params.cases[0].weight"),
    (lambda d: d["params"].update(job="rm"), "JobRequest.params.job"),
    (lambda d: d["params"].update(baseline="fastest"), "JobRequest.params.baseline"),
    (lambda d: d["params"].update(timing={"evil": 1}), "JobRequest.params.timing"),
    (lambda d: d["params"]["seeds"].pop("odd"), "JobRequest.params.seeds: no seeds for case 'odd'"),
    (lambda d: d.update(threads=0), "JobRequest.threads"),
    (lambda d: d.update(stage_timeouts={"load": float("nan")}), "JobRequest.stage_timeouts['load']"),
    (lambda d: d["containment"].update(profile="none"), "JobRequest.containment.profile"),
    (lambda d: d["containment"].update(seccomp=1), "JobRequest.containment.seccomp"),
]


@pytest.mark.parametrize("spoil, named", BAD_REQUESTS, ids=lambda x: x if isinstance(x, str) else "")
def test_a_bad_request_field_is_refused_by_name(spoil, named):
    data = JobRequest(params=requests()[4], platform="cpu", threads=1,
                      stage_timeouts={"load": 1.0}).to_wire()
    spoil(data)
    with pytest.raises(MessageError) as err:
        JobRequest.from_wire(data)
    assert str(err.value).startswith(named)


BAD_REPLIES = [
    (lambda d: d["cases"]["small"].update(launches=[{"cpp": -1}]), "CheckReply.cases['small'].launches[0]['cpp']"),
    (lambda d: d["cases"]["small"].update(launches=[{"cpp": True}]), "CheckReply.cases['small'].launches[0]['cpp']"),
    (lambda d: d["cases"]["small"].update(outputs=[["not a tensor"]]), "CheckReply.cases['small'].outputs[0]"),
    (lambda d: d["cases"]["small"].update(digests=["a", "b"]), "CheckReply.cases['small'].digests"),
    (lambda d: d["cases"]["small"].pop("neuter_digest"), "CheckReply.cases['small'].neuter_digest: missing"),
    (lambda d: d["cases"]["small"].update(neutered={}), "CheckReply.cases['small'].neutered"),
    (lambda d: d.update(cases=[1, 2]), "CheckReply.cases: expected an object"),
    (lambda d: d.update(libraries="x"), "CheckReply.libraries"),
    (lambda d: d.update(ok="yes"), "JobReply.ok"),
]


@pytest.mark.parametrize("spoil, named", BAD_REPLIES, ids=lambda x: x if isinstance(x, str) else "")
def test_a_bad_reply_field_is_refused_by_name(spoil, named):
    data = check_wire()
    spoil(data)
    with pytest.raises(MessageError) as err:
        reply_from_wire("check", wire.decode(wire.encode(data)))
    assert str(err.value).startswith(named)


def test_measure_and_failure_replies_check_their_fields():
    good = replies()[4][1].to_wire()
    for spoil, named in [
            (lambda d: d["cases"]["small"].update(cand_ms=[0.5]), "cases['small'].cand_ms"),
            (lambda d: d["cases"]["small"].update(ref_ms=[1.0, float("inf")]),
             "cases['small'].ref_ms[1]"),
            (lambda d: d["cases"]["small"].update(calls_per_batch=0),
             "cases['small'].calls_per_batch"),
            (lambda d: d["cases"]["small"].update(threads="2"), "cases['small'].threads"),
            (lambda d: d.update(protocol="teleport"), "protocol")]:
        data = json.loads(json.dumps(good))
        spoil(data)
        with pytest.raises(MessageError, match=r"^MeasureReply\." + named.replace("[", r"\[")
                           .replace("]", r"\]").replace("(", r"\(")):
            reply_from_wire("measure", data)
    with pytest.raises(MessageError, match=r"^Failed\.stage"):
        reply_from_wire("check", {"ok": False, "stage": "accepted", "reason": "x"})
    failed = reply_from_wire("check", {"ok": False, "stage": "run", "reason": " "})
    assert failed == Failed("run", "the job failed without a reason")


# ---- through the real driver path --------------------------------------------------------------
# Answers every job with the same result file (its bytes, hex, the server's argument).
SAME_RESULT = server_source({"ready": True, "syscall_filter": "none", "landlock_abi": 0,
                             "capabilities": 0}, r'''
RESULT = bytes.fromhex(ARGS[0])

def handle(job_id, result):
    os.pwrite(result, RESULT, 0)
    reply(job_id)
''')


class SameResultWorker(ScriptedWorker):
    """A worker server that answers every job with the same result file."""
    script = SAME_RESULT
    result = b""

    def server_args(self) -> list[str]:
        return [self.result.hex()]


@pytest.fixture
def scripted(tmp_path):
    workers = []

    def make(result: dict) -> SameResultWorker:
        worker = SameResultWorker(get_platform("cpu"), 1, Limits(total_timeout=30.0),
                                  "none", tmp_path / f"pool{len(workers)}",
                                  BuildService(tmp_path / "cache"))
        worker.result = wire.encode(result)
        workers.append(worker)
        worker.start()
        return worker
    yield make
    for worker in workers:
        worker.close()


def _check_job(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text("x = 1\n")
    return CheckJob(problem=str(problem), candidate="c.py", candidate_source="y = 2\n",
                    init_seed=1, cases=(CaseSpec("small"),), seeds={"small": (1,)},
                    neuter_seeds={"small": 2})


def test_a_well_formed_reply_becomes_a_typed_outcome(scripted, tmp_path):
    out = scripted(check_wire()).run(_check_job(tmp_path))
    assert out.status == "ok", out.describe()
    assert isinstance(out.reply, CheckReply)
    case = out.reply.cases["small"]
    assert case.launches == ({"cpp": 1},) and torch.equal(case.outputs[0][0], torch.tensor([1.0]))


@pytest.mark.parametrize("spoil, named", BAD_REPLIES[:4], ids=lambda x: x if isinstance(x, str) else "")
def test_a_malformed_reply_is_a_failed_job_naming_the_field(scripted, tmp_path, spoil, named):
    data = check_wire()
    spoil(data)
    out = scripted(data).run(_check_job(tmp_path))
    assert out.status == "crashed" and out.reply is None
    assert out.describe().startswith("the job's result is malformed: " + named)
