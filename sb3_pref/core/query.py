"""
Query selection (B-Pref's ``feed_type``): which candidate pairs are worth a teacher's label.

Everything here is algorithm-agnostic and works on plain arrays: ensemble segment returns ``(E, N)``
for the uncertainty rules and segment observations ``(N, H, *obs_shape)`` for k-center.
"""

from collections.abc import Sequence
from typing import Optional, Union

import numpy as np
import torch as th

ArrayLike = Union[np.ndarray, th.Tensor]
# A feature matrix, or column blocks whose concatenation along the last axis is the feature matrix
# (lets k-center measure distances over two segments' observations without building the joint copy).
Features = Union[ArrayLike, Sequence[ArrayLike]]

QUERY_METHODS = ("uniform", "disagreement", "entropy", "kcenter", "kcenter_disagreement", "kcenter_entropy")
_ALIASES = {"kcenter_disagree": "kcenter_disagreement", "kcenter_ent": "kcenter_entropy"}
# Budget for one chunk of labelled rows and its distance block; the peak stays a few times this.
_CHUNK_BYTES = 64 * 2**20


def resolve_query_method(method: Union[int, str]) -> str:
    """
    :param method: a B-Pref ``feed_type`` id (0-5) or a name from ``QUERY_METHODS``
        (``"kcenter_disagree"`` and ``"kcenter_ent"`` are accepted aliases)
    :return: the canonical method name
    """
    if isinstance(method, (int, np.integer)) and not isinstance(method, bool):
        if 0 <= int(method) < len(QUERY_METHODS):
            return QUERY_METHODS[int(method)]
    elif isinstance(method, str):
        name = _ALIASES.get(method.lower(), method.lower())
        if name in QUERY_METHODS:
            return name
    choices = ", ".join(f"{i}={name}" for i, name in enumerate(QUERY_METHODS))
    raise ValueError(f"feed_type (query method) {method!r} is unknown: choose one of {choices}")


def candidate_count(method: Union[int, str], n: int, large_batch: int = 10) -> int:
    """
    :param method: query method (id or name)
    :param n: number of queries wanted this round (``mb_size``)
    :param large_batch: candidates drawn per wanted query by the non-uniform rules
    :return: how many candidate pairs to draw before calling :func:`select_queries`
    """
    if n < 0 or large_batch < 1:
        raise ValueError(f"need n >= 0 and large_batch >= 1, got n={n}, large_batch={large_batch}")
    return n if resolve_query_method(method) == "uniform" else n * large_batch


def _to_numpy(array: ArrayLike) -> np.ndarray:
    if isinstance(array, th.Tensor):
        array = array.detach().cpu().numpy()
    return np.asarray(array, dtype=np.float64)


def pair_logits(returns_0: ArrayLike, returns_1: ArrayLike) -> np.ndarray:
    """
    :param returns_0: predicted segment returns of the first segments per member, ``(E, N)`` (or ``(N,)`` for E = 1)
    :param returns_1: the same for the second segments
    :return: Bradley-Terry logits ``(E, N, 2)`` = ``[R0, R1]``, float64
    """
    returns_0, returns_1 = _to_numpy(returns_0), _to_numpy(returns_1)
    if returns_0.shape != returns_1.shape or returns_0.ndim not in (1, 2):
        raise ValueError(
            f"returns_0 {returns_0.shape} and returns_1 {returns_1.shape} must share one shape (E, N): "
            "one segment return per ensemble member and candidate pair"
        )
    return np.stack([np.atleast_2d(returns_0), np.atleast_2d(returns_1)], axis=-1)


def _log_softmax_pair(returns_0: ArrayLike, returns_1: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    logits = pair_logits(returns_0, returns_1)
    diff = logits[..., 0] - logits[..., 1]
    # log sigmoid(d) = -softplus(-d): stable for any return gap
    return -np.logaddexp(0.0, -diff), -np.logaddexp(0.0, diff)


def disagreement_scores(returns_0: ArrayLike, returns_1: ArrayLike) -> np.ndarray:
    """
    :param returns_0: member returns of the first segments ``(E, N)``
    :param returns_1: member returns of the second segments ``(E, N)``
    :return: ``(N,)`` std over members (ddof 0, as B-Pref) of P(seg_0 preferred)
    """
    log_p0, _ = _log_softmax_pair(returns_0, returns_1)
    return np.exp(log_p0).std(axis=0)


def entropy_scores(returns_0: ArrayLike, returns_1: ArrayLike) -> np.ndarray:
    """
    :param returns_0: member returns of the first segments ``(E, N)``
    :param returns_1: member returns of the second segments ``(E, N)``
    :return: ``(N,)`` mean over members of the entropy (nats) of the 2-way softmax over ``[R0, R1]``
    """
    log_p0, log_p1 = _log_softmax_pair(returns_0, returns_1)
    entropy = -(np.exp(log_p0) * log_p0 + np.exp(log_p1) * log_p1)
    return entropy.mean(axis=0)


def _blocks(features: Optional[Features]) -> list[ArrayLike]:
    if features is None:
        return []
    if isinstance(features, (np.ndarray, th.Tensor)):
        return [features]
    return list(features)


def _writable(array: np.ndarray) -> th.Tensor:
    # The dataset hands out read-only views (PreferenceDataset); torch warns on those, so their rows are copied.
    return th.as_tensor(array if array.flags.writeable else array.copy())


def _rows(blocks: list[ArrayLike], start: int, stop: int) -> th.Tensor:
    # Slicing before converting keeps a 20k-row float64 numpy array from being copied whole.
    parts = [b[start:stop] if isinstance(b, th.Tensor) else _writable(np.asarray(b[start:stop])) for b in blocks]
    return th.cat([p.reshape(stop - start, -1).to(th.float32) for p in parts], dim=1)


def _n_rows(blocks: list[ArrayLike], argument: str) -> int:
    lengths = {len(b) for b in blocks}
    if len(lengths) > 1:
        raise ValueError(f"the blocks of {argument} have different numbers of rows: {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def kcenter_greedy(candidates: Features, labelled: Optional[Features], n: int, chunk_size: Optional[int] = None) -> np.ndarray:
    """
    Greedy k-center: each step picks the candidate whose smallest L2 distance to the labelled points and the
    already-picked candidates is largest (the least covered region). Without labelled points, the first pick
    is the candidate farthest from the candidates' mean (deterministic, and an extreme point like later picks).
    Ties go to the lowest index.

    Distances are computed in float32 with torch; the labelled set is visited in chunks (``torch.cdist``) so
    memory stays bounded for tens of thousands of labelled rows, then each pick costs one ``O(N * F)`` update.

    :param candidates: ``(N, F)`` features (or a list of column blocks, each ``(N, ...)``)
    :param labelled: ``(M, F)`` features of already-labelled points (or column blocks), or None
    :param n: number of candidates to pick, ``0 <= n <= N``
    :param chunk_size: labelled rows per distance chunk; None sizes chunks to about 64 MB
    :return: int64 indices ``(n,)`` into the candidates, in pick order
    """
    cand_blocks, lab_blocks = _blocks(candidates), _blocks(labelled)
    n_cand = _n_rows(cand_blocks, "candidates")
    if not 0 <= n <= n_cand:
        raise ValueError(f"n={n} must be between 0 and the number of candidates ({n_cand})")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of rows (or None for automatic), got {chunk_size}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    cand = _rows(cand_blocks, 0, n_cand)
    n_lab = _n_rows(lab_blocks, "labelled")

    if n_lab > 0:
        if chunk_size is None:
            # per labelled row: its features, plus its distance column (and cdist's matmul scratch) over N candidates
            chunk_size = max(1, _CHUNK_BYTES // (4 * (cand.shape[1] + 3 * n_cand)))
        min_dist = th.full((n_cand,), float("inf"))
        for start in range(0, n_lab, chunk_size):
            chunk = _rows(lab_blocks, start, min(start + chunk_size, n_lab))
            if chunk.shape[1] != cand.shape[1]:
                raise ValueError(f"labelled has {chunk.shape[1]} features per row, candidates have {cand.shape[1]}")
            min_dist = th.minimum(min_dist, th.cdist(cand, chunk).min(dim=1).values)
        first = int(th.argmax(min_dist))
    else:
        min_dist = th.full((n_cand,), float("inf"))
        first = int(th.argmax(th.linalg.vector_norm(cand - cand.mean(dim=0), dim=1)))

    picks = [first]
    for _ in range(n - 1):
        last = picks[-1]
        min_dist = th.minimum(min_dist, th.linalg.vector_norm(cand - cand[last], dim=1))
        # a picked point must never be picked again, even when duplicates leave every distance at 0
        min_dist[last] = -float("inf")
        picks.append(int(th.argmax(min_dist)))
    return np.asarray(picks, dtype=np.int64)


def _pair_features(obs_0: ArrayLike, obs_1: ArrayLike, argument: str) -> list[ArrayLike]:
    if len(obs_0) != len(obs_1):
        raise ValueError(f"{argument}_0 and {argument}_1 must hold the same number of segments: {len(obs_0)} != {len(obs_1)}")
    # kept as two blocks: k-center flattens and concatenates them chunk by chunk
    return [obs_0, obs_1]


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    # stable sort on the negated scores: equal scores keep candidate order, so ties are deterministic
    return np.argsort(-scores, kind="stable")[:k]


def select_queries(
    method: Union[int, str],
    n: int,
    returns_0: Optional[ArrayLike] = None,
    returns_1: Optional[ArrayLike] = None,
    obs_0: Optional[ArrayLike] = None,
    obs_1: Optional[ArrayLike] = None,
    labelled_obs_0: Optional[ArrayLike] = None,
    labelled_obs_1: Optional[ArrayLike] = None,
) -> np.ndarray:
    """
    Choose ``n`` of the candidate pairs to show the teacher.

    :param method: query method, id (0-5) or name (see ``QUERY_METHODS``)
    :param n: number of queries to keep
    :param returns_0: member returns of the candidates' first segments ``(E, N)`` (uncertainty rules)
    :param returns_1: member returns of the candidates' second segments ``(E, N)``
    :param obs_0: observations of the candidates' first segments ``(N, H, ...)`` (k-center rules)
    :param obs_1: observations of the candidates' second segments ``(N, H, ...)``
    :param labelled_obs_0: observations of the already-labelled pairs' first segments ``(M, H, ...)``, or None
    :param labelled_obs_1: observations of the already-labelled pairs' second segments
    :return: int64 indices ``(n,)`` into the candidates (uniform: ``arange(n)``, since candidates are random)
    """
    method = resolve_query_method(method)
    needs_returns = method != "uniform" and method != "kcenter"
    needs_obs = method.startswith("kcenter")
    for argument, value, needed in (
        ("returns_0", returns_0, needs_returns),
        ("returns_1", returns_1, needs_returns),
        ("obs_0", obs_0, needs_obs),
        ("obs_1", obs_1, needs_obs),
    ):
        if needed and value is None:
            raise ValueError(f"query method {method!r} needs {argument}")
    if (labelled_obs_0 is None) != (labelled_obs_1 is None):
        raise ValueError("pass both labelled_obs_0 and labelled_obs_1, or neither")

    sizes = {np.shape(r)[-1] for r in (returns_0, returns_1) if r is not None}
    sizes |= {len(o) for o in (obs_0, obs_1) if o is not None}
    if len(sizes) > 1:
        raise ValueError(f"returns_* (last axis) and obs_* (first axis) disagree on the number of candidates: {sorted(sizes)}")
    n_cand = sizes.pop() if sizes else n
    if not 0 <= n <= n_cand:
        raise ValueError(f"n={n} queries requested from only {n_cand} candidates: draw more candidates (candidate_count)")

    if method == "uniform":
        return np.arange(n, dtype=np.int64)
    if method in ("disagreement", "entropy"):
        score = disagreement_scores if method == "disagreement" else entropy_scores
        return _top(score(returns_0, returns_1), n).astype(np.int64)  # type: ignore[arg-type]  # checked above

    pool = np.arange(n_cand)
    if method != "kcenter":
        # B-Pref keeps the most uncertain half before spreading the picks out
        score = disagreement_scores if method == "kcenter_disagreement" else entropy_scores
        pool = np.sort(_top(score(returns_0, returns_1), max(n, n_cand // 2)))  # type: ignore[arg-type]
    candidates = [block[pool] for block in _pair_features(obs_0, obs_1, "obs")]  # type: ignore[arg-type]
    labelled = None
    if labelled_obs_0 is not None:
        labelled = _pair_features(labelled_obs_0, labelled_obs_1, "labelled_obs")  # type: ignore[arg-type]
    return pool[kcenter_greedy(candidates, labelled, n)].astype(np.int64)
