"""Model replicas on Ray: one :class:`LanguageModel` whose batches are spread over N actors.

``RayModel("default", workers=2)`` starts two Ray actors, each holding its own backend
(transformers, vLLM or an ``openai:`` client, built by :func:`kgprobe.models.registry.load_model`
inside the actor), on a local Ray instance bound to the loopback interface, or on a
running cluster (``ray_address``). Ray is imported only here, so a run without workers
never loads it.

Identical results on any number of workers
------------------------------------------
A round's requests are cut into units (:mod:`kgprobe.models.units`: the requests of one
probe of one edge) and every unit is answered by its own backend call, on whichever
worker, so a unit's answer does not depend on what else is in the round. A run on 1, 2
or N workers gets bit-identical answers, hence identical verdicts and final state, and
equal to an in-process run that asks unit by unit (:class:`~kgprobe.models.units.UnitCalls`,
what ``kgprobe sweep`` does). Units are dealt to the workers in contiguous blocks of
about equal size and the answers are put back in request order.

Faults
------
A worker whose process dies (``kill -9``, an out-of-memory kill, a lost node) fails its
block with Ray's actor error: a fresh actor is started in its place and the block is
sent to the next worker (or the fresh one), whole, up to ``max_resends`` times. Each
request index is filled exactly once, so nothing is lost or answered twice. A cluster
that goes away fails the round with a :class:`~kgprobe.errors.ModelError` (exit 4),
keeping the answers that did arrive (:class:`~kgprobe.errors.PartialBatchError`); the
run file stays resumable.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any, Callable, Sequence

from kgprobe.errors import InputError, KgprobeError, ModelError, PartialBatchError
from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest, ScoreResult
from kgprobe.models.units import request_units


def deal_units(units: Sequence[tuple[int, int]], workers: int) -> list[list[tuple[int, int]]]:
    """Contiguous blocks of ``units``, one per worker, of about equal request counts."""
    total = units[-1][1] if units else 0
    blocks: list[list[tuple[int, int]]] = [[] for _ in range(workers)]
    for unit in units:
        # A unit goes to the worker whose share of the requests its middle falls in.
        middle = (unit[0] + unit[1]) / 2
        blocks[min(workers - 1, int(middle * workers / max(total, 1)))].append(unit)
    return blocks


class Replica:
    """One model replica: the body of a Ray actor (also usable in-process, for tests)."""

    def __init__(self, spec: str, options: dict, device: str | None, threads: int | None):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        if threads:
            import torch

            torch.set_num_threads(int(threads))
        from kgprobe.models.registry import load_model

        self.model = load_model(spec, device=device, **options)
        self.units_answered = 0
        self.cpu_seconds = 0.0

    def describe(self) -> dict:
        return {"identity": self.model.identity, "name": self.model.name, "can_score": self.model.can_score,
                "pid": os.getpid(), "units_answered": self.units_answered, "cpu_seconds": self.cpu_seconds,
                "process_cpu_seconds": time.process_time()}

    def score_units(self, units: list[list[ScoreRequest]]) -> list[list[ScoreResult]]:
        return self._answer(self.model.score, units)

    def generate_units(self, units: list[list[GenerateRequest]]) -> list[list[str]]:
        return self._answer(self.model.generate, units)

    def _answer(self, call, units: list) -> list:
        started = time.process_time()
        out = [call(unit) for unit in units]
        self.units_answered += len(units)
        self.cpu_seconds += time.process_time() - started
        return out

    def close(self) -> None:
        self.model.close()


#: The Ray actor class of :class:`Replica`, made once per process.
_REMOTE_REPLICA = None


def _import_ray(local: bool):
    if local and "ray" not in sys.modules:
        # A private instance listens on the loopback interface only (Ray reads this when
        # it is imported; it otherwise binds its services to the machine's network address).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError as exc:
        raise ModelError(f"--workers / --ray-address need Ray, which is not installed ({exc}); "
                         "install it with `pip install 'kgprobe[distributed]'`") from None
    if local:
        # Ray imported earlier by someone else read the variable before it was set: the
        # same switch, where Ray keeps it.
        constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
        if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", False):
            constants.ENABLE_RAY_CLUSTER = False
    return ray


class RayModel(LanguageModel):
    """``spec`` served by ``workers`` Ray actors (see the module doc).

    Args:
        spec: a model spec for :func:`~kgprobe.models.registry.load_model`, loaded in each actor.
        workers: replicas to start; None: one per GPU of the cluster, else 2 on a local
            instance and one per node on a cluster.
        ray_address: a running cluster (its head's ``host:6379``, or ``auto``);
            None: a private local instance on 127.0.0.1 with ``workers × threads_per_worker`` CPUs.
        options: backend keyword arguments (``model_options``).
        device: ``--device`` for local backends inside the actors.
        threads_per_worker: CPU threads (and Ray CPUs) per replica.
        gpus_per_worker: GPUs per replica; None: 1 when the cluster has GPUs (times
            ``tensor_parallel_size`` for vLLM; a share of one when there are more replicas
            than GPUs), else 0.
        max_resends: how often one block may be sent again after its worker died.
        start_timeout: seconds the workers may take to start and load the model.
    """

    def __init__(self, spec: str, *, workers: int | None = None, ray_address: str | None = None,
                 options: dict | None = None, device: str | None = None, threads_per_worker: int = 1,
                 gpus_per_worker: float | None = None, max_resends: int = 3, start_timeout: float = 900.0):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise InputError(f"--workers must be a whole number >= 1, not {workers!r}")
        if isinstance(spec, LanguageModel) or not isinstance(spec, str):
            raise InputError("workers need a model spec (a string such as 'default'): each worker loads its own "
                             "copy of the model, and a model object cannot be copied into them")
        # A cluster on this machine's loopback interface is joined from the loopback address too.
        ray = _import_ray(local=ray_address is None or str(ray_address).split("://")[-1].split(":")[0]
                          in ("127.0.0.1", "localhost"))
        self._ray = ray
        self.spec = spec
        self.options = dict(options or {})
        self.device = device
        self.threads_per_worker = int(threads_per_worker)
        self.max_resends = int(max_resends)
        self.ray_address = ray_address
        #: Workers that died and were replaced, since creation (for tests and reports).
        self.replaced = 0
        #: For fault tests: called once a round's blocks are sent, before any answer is read.
        self.after_send: Callable[[], None] | None = None
        #: Seconds the cluster's head may stay unreachable before a round fails.
        self.cluster_grace = 20.0
        self._cluster_lost = False
        self._owns_ray = False
        self._actors: list[Any] = []
        if not ray.is_initialized():
            self._start_ray(workers)
        resources = ray.cluster_resources()
        gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 0))
        per_replica = float(self.options.get("tensor_parallel_size", 1))
        if workers is None:
            if gpus:
                workers = max(1, int(gpus // per_replica))
            else:
                workers = 2 if self._owns_ray else max(1, len([n for n in ray.nodes() if n.get("Alive")]))
        self.workers = int(workers)
        if gpus_per_worker is None:
            # A GPU each (a tensor-parallel group each for vLLM); more replicas than GPUs share them.
            gpus_per_worker = min(per_replica, gpus / self.workers) if gpus else 0.0
        self.gpus_per_worker = float(gpus_per_worker)
        try:
            need_cpus, need_gpus = self.workers * self.threads_per_worker, self.workers * self.gpus_per_worker
            if need_cpus > cpus or need_gpus > gpus + 1e-9:
                raise ModelError(f"{self.workers} workers need {need_cpus:g} CPUs and {need_gpus:g} GPUs, but the "
                                 f"Ray cluster has {cpus:g} CPUs and {gpus:g} GPUs; use fewer --workers or a "
                                 "larger cluster")
            self._actors = [self._new_actor() for _ in range(self.workers)]
            infos = self._call_all("describe", timeout=start_timeout)
        except BaseException:
            self.close()
            raise
        identities = {info["identity"] for info in infos}
        if len(identities) != 1:
            self.close()
            raise ModelError(f"the {self.workers} workers loaded different models ({sorted(identities)}); "
                             "every node of the cluster needs the same model files and versions")
        try:
            host, _, port = self._ray.get_runtime_context().gcs_address.rpartition(":")
            self._gcs: tuple[str, int] | None = (host, int(port))
        except Exception:  # a connection kind without a GCS address
            self._gcs = None
        self._identity = infos[0]["identity"]
        self._name = infos[0]["name"]
        self.can_score = bool(infos[0]["can_score"])

    # ------------------------------------------------------------------ set-up
    def _start_ray(self, workers: int | None) -> None:
        ray = self._ray
        # Nothing leaves the machine unless a cluster is asked for.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray ends the whole process when its head stays unreachable for this long (60 s by
        # default); kgprobe notices a lost head itself after `cluster_grace` seconds and ends
        # the run with an error and a resumable run file, so Ray is given longer.
        os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "600")
        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            if self.ray_address:
                self._check_reachable(self.ray_address)
                ray.init(address=self.ray_address, **kwargs)
            else:
                cpus = (workers or 2) * self.threads_per_worker
                ray.init(address="local", num_cpus=cpus, _node_ip_address="127.0.0.1", **kwargs)
        except KgprobeError:
            raise
        except Exception as exc:
            where = f"the Ray cluster at {self.ray_address}" if self.ray_address else "a local Ray instance"
            hint = (" Check the address (`ray status` on the head node); a cluster started with token "
                    "authentication (`ray start`'s default) also needs RAY_AUTH_MODE=token here and its token "
                    "(~/.ray/auth_token or RAY_AUTH_TOKEN)" if self.ray_address else "")
            raise ModelError(f"cannot start or reach {where}: {type(exc).__name__}: {exc}.{hint}") from None
        self._owns_ray = True

    @staticmethod
    def _check_reachable(address: str) -> None:
        """Fail at once on a head address where nothing listens (Ray would keep retrying)."""
        host, sep, port = address.split("://")[-1].rpartition(":")
        if not sep or not port.isdigit():
            return  # "auto" and other forms: Ray resolves them
        try:
            with socket.create_connection((host, int(port)), timeout=5.0):
                return
        except OSError as exc:
            raise ModelError(f"cannot reach the Ray cluster at {address}: nothing answers there ({exc.strerror or exc}). "
                             "Start it with `ray start --head` or check the address (`ray status` on the head "
                             "node)") from None

    def _new_actor(self):
        global _REMOTE_REPLICA
        if _REMOTE_REPLICA is None:
            _REMOTE_REPLICA = self._ray.remote(Replica)
        cls = _REMOTE_REPLICA.options(num_cpus=self.threads_per_worker, num_gpus=self.gpus_per_worker,
                                                max_restarts=0)
        return cls.remote(self.spec, self.options, self.device, self.threads_per_worker)

    def _call_all(self, method: str, timeout: float | None = None) -> list:
        try:
            return self._ray.get([getattr(actor, method).remote() for actor in self._actors], timeout=timeout)
        except self._ray.exceptions.RayTaskError as exc:
            raise self._cause(exc) from None
        except self._ray.exceptions.GetTimeoutError:
            raise ModelError(f"the {len(self._actors)} workers did not start within {timeout:g} s (`ray status` "
                             "shows whether the cluster is busy or short of resources)") from None
        except self._ray.exceptions.RayError as exc:
            raise ModelError(f"the workers could not start: {type(exc).__name__}: {exc}") from None

    # ------------------------------------------------------------------ interface
    @property
    def identity(self) -> str:
        return self._identity

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"RayModel({self.spec!r}, workers={self.workers}, ray_address={self.ray_address!r})"

    def worker_pids(self) -> list[int]:
        """The process id of each worker (for fault tests and monitoring)."""
        return [info["pid"] for info in self.worker_stats()]

    def worker_stats(self) -> list[dict]:
        """Per worker: ``pid``, ``units_answered``, the ``cpu_seconds`` its answers took and its
        process's CPU time so far (``process_cpu_seconds``)."""
        return self._call_all("describe")

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        return self._dispatch("score_units", list(requests))

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return self._dispatch("generate_units", list(requests))

    def close(self) -> None:
        """Stop the workers, and the local Ray instance when this model started it. Safe to call twice."""
        ray = self._ray
        actors, self._actors = self._actors, []
        if self._cluster_lost:
            return  # nothing to stop, and Ray's calls would wait for the lost head
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already dead, or the cluster is gone
                pass
        if self._owns_ray:
            self._owns_ray = False
            try:
                ray.shutdown()
            except Exception:
                pass

    # ------------------------------------------------------------------ dispatch
    def _cause(self, exc) -> Exception:
        """The backend's own error inside a worker, as kgprobe reports it."""
        cause = getattr(exc, "cause", None)
        if isinstance(cause, PartialBatchError):
            return ModelError(str(cause))
        if isinstance(cause, KgprobeError):
            return cause
        return ModelError(f"a worker failed: {type(cause or exc).__name__}: {cause or exc}")

    def _dispatch(self, method: str, requests: list) -> list:
        if not requests:
            return []
        if not self._actors:
            raise ModelError(f"{self!r} is closed")
        ray = self._ray
        results: list[Any] = [None] * len(requests)
        answered: set[int] = set()
        pending: dict[Any, tuple[list[tuple[int, int]], int, int]] = {}

        def send(block: list[tuple[int, int]], worker: int, sends: int) -> None:
            units = [requests[a:b] for a, b in block]
            pending[getattr(self._actors[worker], method).remote(units)] = (block, worker, sends)

        for worker, block in enumerate(deal_units(request_units(requests), len(self._actors))):
            if block:
                send(block, worker, 0)
        if self.after_send is not None:
            self.after_send()
        unreachable_since = None
        while pending:
            try:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=2.0)
                if not ready:
                    if self._head_reachable():
                        unreachable_since = None
                    elif unreachable_since is None:
                        unreachable_since = time.monotonic()
                    elif time.monotonic() - unreachable_since > self.cluster_grace:
                        self._cluster_lost = True
                        raise ray.exceptions.RaySystemError(
                            f"its head did not answer for {self.cluster_grace:g} s")
                    continue
                future = ready[0]
                block, worker, sends = pending.pop(future)
                try:
                    outputs = ray.get(future)
                except ray.exceptions.RayActorError as exc:
                    if not self._head_reachable():
                        # The whole cluster went, not one worker: Ray's calls would wait for the head.
                        self._cluster_lost = True
                        raise ray.exceptions.RaySystemError("its head does not answer") from None
                    self._replace(worker)
                    if sends >= self.max_resends:
                        raise self._partial(
                            ModelError(f"a block of {sum(b - a for a, b in block)} requests lost its worker "
                                       f"{sends + 1} times (last: {type(exc).__name__}); check the cluster's "
                                       "nodes (memory, `ray status`)"), results, answered) from None
                    send(block, (worker + 1) % len(self._actors), sends + 1)
                    continue
            except ray.exceptions.RayTaskError as exc:
                raise self._partial(self._cause(exc), results, answered) from None
            except ray.exceptions.RayError as exc:
                where = f"the Ray cluster at {self.ray_address}" if self.ray_address else "the local Ray instance"
                raise self._partial(
                    ModelError(f"{where} went away during the round ({type(exc).__name__}: {exc}). Every "
                               "finished round is in the run file: start the cluster again and "
                               "`kgprobe resume RUN` (with --ray-address, or without it to resume here)"),
                    results, answered) from None
            for (a, b), output in zip(block, outputs):
                if len(output) != b - a:
                    raise ModelError(f"a worker returned {len(output)} answers for {b - a} requests")
                results[a:b] = output
                answered.update(range(a, b))
        return results

    def _head_reachable(self) -> bool:
        """Does the cluster's head (its GCS) still accept connections? True when its address is
        unknown (then only Ray's own errors end a round)."""
        if self._gcs is None:
            return True
        try:
            with socket.create_connection(self._gcs, timeout=2.0):
                return True
        except OSError:
            return False

    def _replace(self, worker: int) -> None:
        """Start a fresh actor in place of a dead one (it loads while the others work); the dead
        one is not restarted (``max_restarts=0``), so there is nothing to stop."""
        self._actors[worker] = self._new_actor()
        self.replaced += 1

    @staticmethod
    def _partial(error: ModelError, results: list, answered: set[int]) -> ModelError:
        if not answered:
            return error
        return PartialBatchError(f"{error} ({len(answered)} of {len(results)} requests were answered)",
                                 {i: results[i] for i in sorted(answered)})
