"""
Per-task defaults a grid starts from: B-Pref's published settings for its PrefPPO / PPO runs
(``walker_walk``, ``quadruped_walk``, Meta-World ``button-press-topdown`` and ``sweep-into``), and
RL2 presets for the trial tasks (DarkRoom, bandits, Meta-World ML1). A config overrides any of them.

Hyperparameter names are the ``dest`` names of the B-Pref flags (:func:`~sb3_pref.experiments.flags.flag_names`)
for ``ppo`` / ``prefppo``, :data:`RL2_KEYS` for ``rl2`` and :data:`AD_KEYS` for ``ad``. The run kinds
(``*_runs.py``) read these tables; :func:`task_defaults` asks a kind for its defaults.
"""

from typing import Any

from sb3_pref.envs.factory import task_family
from sb3_pref.experiments.registry import run_kind

# B-Pref's walker_walk settings; every dm_control task starts from these.
_DMC = dict(
    lr=5e-5,
    batch_size=64,
    n_envs=32,
    n_steps=500,
    n_epochs=20,
    gae_lambda=0.92,
    clip_init=0.4,
    ent_coef=0.0,
    num_layer=3,
    hidden_dim=256,
    use_sde=True,
    normalize=True,
    total_timesteps=4_000_000,
    unsuper_step=32000,
    unsuper_n_epochs=50,
    re_segment=50,
    re_num_interaction=16000,
    re_update=100,
    re_feed_type="disagreement",
)
# B-Pref's Meta-World settings (its button-press values); PrefPPO runs 3M steps, PPO 4M.
_METAWORLD = dict(_DMC, lr=3e-4, batch_size=128, n_steps=250, re_update=50)

# task -> {"all": ..., "ppo": ..., "prefppo": ..., "budgets": [...]}, on top of _DMC / _METAWORLD.
BPREF_TASKS: dict[str, dict[str, Any]] = {
    "walker_walk": {"budgets": ["500x50", "1000x100"]},
    "quadruped_walk": {"all": dict(batch_size=128, n_envs=16, gae_lambda=0.9), "budgets": ["1000x100", "2000x200"]},
    "button-press-topdown": {
        "prefppo": dict(n_envs=16, total_timesteps=3_000_000),
        "ppo": dict(n_envs=8),
        "budgets": ["10000x100", "20000x200"],
    },
    "sweep-into": {
        "all": dict(batch_size=256, n_envs=32),
        # B-Pref's PPO script for sweep-into uses lr 3e-5, ten times below its PrefPPO runs; kept as published.
        "prefppo": dict(total_timesteps=3_000_000),
        "ppo": dict(lr=3e-5),
        "budgets": ["10000x100", "20000x200"],
    },
}
_GENERIC_METAWORLD = BPREF_TASKS["button-press-topdown"]
_GENERIC_DMC = BPREF_TASKS["walker_walk"]

#: RL2 hyperparameters a config may set
RL2_KEYS = (
    "total_timesteps",
    "n_envs",
    "n_steps",
    "batch_size",
    "n_epochs",
    "lr",
    "ent_coef",
    "gamma",
    "gae_lambda",
    "hidden_size",
    "cell",
    "episodes_per_trial",
    "eval_trials",
    "deterministic_eval",
    "n_arms",
    "n_pulls",
    "max_episode_steps",
)
RL2_COMMON = dict(cell="gru", gamma=0.99, gae_lambda=0.95, eval_trials=500, deterministic_eval=False)
# Tuned on DarkRoom by the RL2 work; the bandit and Meta-World presets are reasonable starting points.
RL2_PRESETS: dict[str, dict[str, Any]] = {
    "darkroom": dict(
        total_timesteps=8_000_000,
        n_envs=32,
        n_steps=160,
        batch_size=1280,
        n_epochs=4,
        lr=1e-3,
        ent_coef=0.03,
        hidden_size=128,
        episodes_per_trial=4,
    ),
    "bandit": dict(
        total_timesteps=2_000_000,
        n_envs=16,
        n_steps=20,
        batch_size=160,
        n_epochs=8,
        lr=3e-3,
        ent_coef=0.01,
        hidden_size=64,
        n_arms=5,
        n_pulls=10,
    ),
    "ml1": dict(
        total_timesteps=5_000_000,
        n_envs=8,
        n_steps=1000,
        batch_size=2000,
        n_epochs=10,
        lr=3e-4,
        ent_coef=0.0,
        hidden_size=256,
        episodes_per_trial=10,
        max_episode_steps=200,
    ),
}


#: AD settings a config may set (``total_timesteps`` counts gradient updates)
AD_KEYS = (
    "total_timesteps", "learner", "learner_steps", "learners_per_goal", "max_history_steps", "seq_len", "embed_dim",
    "n_layers", "n_heads", "ff_dim", "attention_dropout", "residual_dropout", "lr", "min_lr", "batch_size",
    "episodes_per_trial", "eval_trials", "size", "episode_length", "n_test", "terminate_on_goal", "observation",
    "deterministic_eval", "recency_bias", "anneal_fraction", "anneal_after_reward", "preset",
)  # fmt: skip
#: the seed's DarkRoom setting (A2C learners, 2.5M steps each, the 4-layer model, 22k updates)
AD_PRESETS: dict[str, dict[str, Any]] = {
    "darkroom": dict(
        total_timesteps=22_000, learner="a2c", learner_steps=2_500_000, learners_per_goal=1, max_history_steps=800_000,
        seq_len=256, embed_dim=64, n_layers=4, n_heads=4, ff_dim=2048, attention_dropout=0.5, residual_dropout=0.1,
        lr=3e-4, min_lr=2e-6, batch_size=32, episodes_per_trial=20, eval_trials=92, size=9, episode_length=20, n_test=23,
        terminate_on_goal=True, observation="xy", deterministic_eval=False, recency_bias=False, anneal_fraction=0.5,
        anneal_after_reward=False, preset="seed",
    ),
}  # fmt: skip
#: named AD settings a config picks with ``preset:`` (its other keys then override the preset's):
#: ``seed``, the seed's DarkRoom setting above, ``noisy_room``, :data:`sb3_pref.ad.presets.NOISY_ROOM`
#: (AD^epsilon histories on a 5 x 5 room: in-context learning on held-out goals in minutes on a CPU), and
#: ``noisy_room_20``, :data:`sb3_pref.ad.presets.NOISY_ROOM_20` (the same room, a context of 20 episodes).
#: Written out here so that reading a config imports no torch; a test checks them against the library's presets.
_NOISY_ROOM: dict[str, Any] = dict(
    total_timesteps=500, learner="noisy_expert", learner_steps=48, learners_per_goal=20, max_history_steps=48,
    seq_len=48, embed_dim=48, n_layers=1, n_heads=4, ff_dim=192, attention_dropout=0.0, residual_dropout=0.0,
    lr=3e-3, min_lr=1.5e-4, batch_size=32, episodes_per_trial=6, eval_trials=192, size=5, episode_length=8, n_test=8,
    terminate_on_goal=False, observation="xy", deterministic_eval=False, recency_bias=True, anneal_fraction=0.75,
    anneal_after_reward=False, preset="noisy_room",
)  # fmt: skip
AD_NAMED_PRESETS: dict[str, dict[str, Any]] = {
    "seed": AD_PRESETS["darkroom"],
    "noisy_room": _NOISY_ROOM,
    # the same room, split and evaluation; a context of 20 episodes and what it takes to learn in it
    "noisy_room_20": dict(
        _NOISY_ROOM, total_timesteps=5_000, learner_steps=160, learners_per_goal=80, max_history_steps=160, seq_len=160,
        embed_dim=64, n_layers=2, ff_dim=256, lr=2e-3, min_lr=1e-4, batch_size=16, episodes_per_trial=20,
        eval_trials=128, anneal_fraction=0.125, anneal_after_reward=True, preset="noisy_room_20",
    ),
}  # fmt: skip


def ad_preset(name: Any) -> dict[str, Any]:
    """
    :param name: a key of :data:`AD_NAMED_PRESETS`
    :return: a copy of its settings
    :raises ValueError: naming the presets
    """
    if name not in AD_NAMED_PRESETS:
        raise ValueError(f"preset must be one of {sorted(AD_NAMED_PRESETS)}, got {name!r}")
    return dict(AD_NAMED_PRESETS[name])


def metaworld_task(name: str) -> str:
    """``metaworld_button-press-topdown-v2`` / ``button-press-topdown-v3`` -> ``button-press-topdown``."""
    for prefix in ("metaworld_", "Meta-World/", "metaworld/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    for suffix in ("-v2", "-v3"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def is_trial_task(task: str) -> bool:
    """Whether ``task`` is a trial task of meta-RL (DarkRoom, bandits, ML1), on which rl2 and ad run and the others do not."""
    return task_family(task) in RL2_PRESETS


def bpref_entry(task: str) -> dict[str, Any]:
    """The :data:`BPREF_TASKS` entry of a task (the generic dm_control or Meta-World one when B-Pref has none)."""
    if task_family(task) == "metaworld":
        return BPREF_TASKS.get(metaworld_task(task), _GENERIC_METAWORLD)
    return BPREF_TASKS.get(task, _GENERIC_DMC)


def bpref_settings(algo: str, task: str) -> dict[str, Any]:
    """
    B-Pref's settings for a run of its ``ppo`` or ``prefppo`` script on a (non-trial) task.

    :param algo: the script (the entry's ``algo`` part applies on top of its ``all`` part)
    :param task: a dm_control, gymnasium or Meta-World task
    :return: a new dict of flag names
    """
    entry = bpref_entry(task)
    base = _METAWORLD if task_family(task) == "metaworld" else _DMC
    return {**base, **entry.get("all", {}), **entry.get(algo, {})}


def task_defaults(algo: str, task: str) -> dict[str, Any]:
    """
    The hyperparameters a run of ``algo`` on ``task`` starts from, as its run kind declares them
    (:mod:`sb3_pref.experiments.registry`).

    :param algo: ``"ppo"``, ``"prefppo"``, ``"pebble"``, ``"sac"``, ``"rl2"``, ``"ad"`` or a registered kind
    :param task: e.g. ``"walker_walk"``, ``"metaworld_sweep-into-v2"``, ``"darkroom"``, ``"ml1-reach"``
    :return: a new dict (B-Pref flag names for ppo / prefppo, B-Pref's ``train_PEBBLE.py`` names for
        pebble / sac, :data:`RL2_KEYS` for rl2, :data:`AD_KEYS` for ad)
    :raises ValueError: for an unknown algorithm, or a task it does not run on
    """
    return run_kind(algo).defaults(task)


def default_budgets(task: str) -> list[str]:
    """B-Pref's feedback budgets for ``task``, as ``"max_feed x re_batch"`` strings (e.g. ``"1000x100"``)."""
    return list(bpref_entry(task)["budgets"])
