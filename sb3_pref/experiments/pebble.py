"""
PEBBLE runs as B-Pref starts them: ``train_PEBBLE.py key=value ...`` (its Hydra overrides), per-task
settings from its run scripts, and the :class:`~sb3_pref.SAC_REWARD` they build.

B-Pref's SAC differs from SB3's in two settings that are mapped, not copied: its critic target is
updated every 2 gradient steps (``target_update_interval=2``) and its temperature starts at 0.1
(``ent_coef="auto_0.1"``). Its actor's log-std bounds (-5, 2) are SB3's defaults too.
"""

import difflib
from collections.abc import Sequence
from typing import Any

from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.core.reward_model import BPREF_HIDDEN_DIM, BPREF_N_LAYERS, RewardModel
from sb3_pref.sac_reward import SAC_REWARD

#: B-Pref's ``config/train_PEBBLE.yaml`` and ``config/agent/sac.yaml`` defaults (flat names), with
#: ``num_unsup_steps`` at its run scripts' 9000, plus the reward network's size (``reward_hidden_dim``,
#: ``reward_hidden_depth``), which B-Pref fixes at 3 layers of 256.
PEBBLE_DEFAULTS: dict[str, Any] = {
    "env": "walker_walk", "seed": 1, "segment": 50, "activation": "tanh", "num_seed_steps": 1000,
    "num_unsup_steps": 9000, "num_interact": 5000, "reward_lr": 3e-4, "reward_batch": 128, "reward_update": 200,
    "feed_type": 0, "reset_update": 100, "topK": 5, "ensemble_size": 3, "max_feedback": 1400,
    "teacher_beta": -1.0, "teacher_gamma": 1.0, "teacher_eps_mistake": 0.0, "teacher_eps_skip": 0.0,
    "teacher_eps_equal": 0.0, "num_train_steps": 1_000_000, "gradient_update": 1, "device": "auto",
    "agent.params.actor_lr": 1e-4, "agent.params.critic_lr": 1e-4, "agent.params.alpha_lr": 1e-4,
    "agent.params.batch_size": 1024, "agent.params.init_temperature": 0.1, "agent.params.discount": 0.99,
    "agent.params.critic_tau": 0.005, "agent.params.critic_target_update_frequency": 2,
    "diag_gaussian_actor.params.hidden_dim": 1024, "diag_gaussian_actor.params.hidden_depth": 2,
    "double_q_critic.params.hidden_dim": 1024, "double_q_critic.params.hidden_depth": 2,
    # Not B-Pref settings: its reward_model.py hard-codes 3 hidden layers of 256 (these defaults). Named like the
    # actor's and critic's, so that a run can afford a smaller reward network on a CPU (prefppo's re_hidden_dim).
    "reward_hidden_dim": BPREF_HIDDEN_DIM, "reward_hidden_depth": BPREF_N_LAYERS,
    # Not B-Pref settings either: PEBBLE's critic reset and uniform first round, which B-Pref always does, as options.
    "reset_critic": True, "first_round_uniform": True,
}  # fmt: skip

#: B-Pref's dm_control run scripts' settings (walker_walk's, cheetah_run's); a grid gives them to a dm_control task
#: B-Pref has no script for
_DMC = {"agent.params.actor_lr": 5e-4, "agent.params.critic_lr": 5e-4, "num_train_steps": 500_000,
        "num_interact": 20_000, "reward_update": 50}  # fmt: skip
_METAWORLD = {
    "agent.params.actor_lr": 3e-4, "agent.params.critic_lr": 3e-4, "num_train_steps": 1_000_000,
    "agent.params.batch_size": 512, "double_q_critic.params.hidden_dim": 256, "double_q_critic.params.hidden_depth": 3,
    "diag_gaussian_actor.params.hidden_dim": 256, "diag_gaussian_actor.params.hidden_depth": 3,
    "reward_update": 10, "num_interact": 5000,
}  # fmt: skip

#: Not a B-Pref script: PEBBLE on gymnasium's Pendulum-v1 sized for a CPU (``train_PEBBLE.py env=Pendulum-v1``),
#: SB3's SAC defaults (2x256, batch 256, lr 3e-4, one gradient step per env step), the library's 2x64 reward
#: model, 200 labels in rounds of 25 every 2000 steps after 2000 steps of pretraining, 20k steps in all
#: (benchmarks/pebble/README.md: level with SAC there, in about 7 CPU minutes).
_PENDULUM = {
    "agent.params.actor_lr": 3e-4, "agent.params.critic_lr": 3e-4, "agent.params.alpha_lr": 3e-4,
    "agent.params.batch_size": 256, "agent.params.init_temperature": 1.0, "agent.params.critic_target_update_frequency": 1,
    "diag_gaussian_actor.params.hidden_dim": 256, "double_q_critic.params.hidden_dim": 256,
    "reward_hidden_dim": 64, "reward_hidden_depth": 2, "reward_lr": 1e-3, "reward_update": 50, "feed_type": 1,
    "num_unsup_steps": 2000, "num_interact": 2000, "num_train_steps": 20_000, "max_feedback": 200, "reward_batch": 25,
}  # fmt: skip

#: Per-task settings of B-Pref's ``scripts/<task>/<budget>/<teacher>/run_PEBBLE.sh``; ``budgets`` lists
#: its (max_feedback, reward_batch) pairs. B-Pref ships no PEBBLE script for cheetah_run (walker_walk's
#: settings are used) nor door-open (button-press's).
PEBBLE_TASKS: dict[str, dict[str, Any]] = {
    "walker_walk": {**_DMC, "budgets": [(100, 10), (1000, 100)]},
    "cheetah_run": {**_DMC, "budgets": [(100, 10), (1000, 100)]},
    "quadruped_walk": {**_DMC, "agent.params.actor_lr": 1e-4, "agent.params.critic_lr": 1e-4,
                       "num_train_steps": 1_000_000, "num_interact": 30_000, "budgets": [(1000, 100), (2000, 200)]},
    "metaworld_button-press-v2": {**_METAWORLD, "budgets": [(10000, 50), (20000, 100)]},
    "metaworld_door-open-v2": {**_METAWORLD, "budgets": [(10000, 50), (20000, 100)]},
    "metaworld_sweep-into-v2": {**_METAWORLD, "budgets": [(10000, 50), (20000, 100)]},
}  # fmt: skip


#: Settings of :func:`parse_overrides` (so of ``train_PEBBLE.py``) for tasks B-Pref has no script for: quick
#: runs sized for a CPU. Grids do not read them: a grid's config gives its own settings on B-Pref's defaults.
QUICK_TASKS: dict[str, dict[str, Any]] = {"Pendulum-v1": _PENDULUM}


def _convert(key: str, text: str) -> Any:
    default = PEBBLE_DEFAULTS[key]
    try:
        if isinstance(default, bool):
            # Hydra's spellings; anything else (a typo such as "ture") is refused, not read as False.
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if isinstance(default, int):
            return int(float(text))  # B-Pref writes 1e6
        if isinstance(default, float):
            return float(text)
    except ValueError:
        expected = "true or false" if isinstance(default, bool) else f"a {type(default).__name__}"
        raise ValueError(f"{key}={text!r}: expected {expected}") from None
    return text


def parse_overrides(argv: Sequence[str]) -> dict[str, Any]:
    """
    B-Pref's ``key=value`` command line on top of :data:`PEBBLE_DEFAULTS` and the task's :data:`PEBBLE_TASKS`
    (or :data:`QUICK_TASKS`) entry.

    The other examples' flag style works too: ``--max-feedback 1000`` and ``--max_feedback=1000`` are
    ``max_feedback=1000`` (dashes in a flag's name read as underscores).

    :param argv: e.g. ``["env=walker_walk", "max_feedback=1000", "reward_batch=100"]``
    :return: every setting, flat names
    """
    given: dict[str, Any] = {}
    for item in _flags_as_overrides(argv):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r}: arguments are B-Pref's key=value overrides, e.g. env=walker_walk")
        if key not in PEBBLE_DEFAULTS:
            close = difflib.get_close_matches(key, PEBBLE_DEFAULTS, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else f"known settings: {', '.join(sorted(PEBBLE_DEFAULTS))}"
            raise ValueError(f"unknown setting {key!r}: {hint}")
        given[key] = _convert(key, value)
    env = given.get("env", PEBBLE_DEFAULTS["env"])
    task = {key: value for key, value in PEBBLE_TASKS.get(env, QUICK_TASKS.get(env, {})).items() if key != "budgets"}
    return {**PEBBLE_DEFAULTS, **task, **given}


def _flags_as_overrides(argv: Sequence[str]) -> list[str]:
    """:return: ``argv`` with every ``--name value`` / ``--name=value`` written as B-Pref's ``name=value``"""
    items, tokens = [], list(argv)
    while tokens:
        token = tokens.pop(0)
        if not token.startswith("--"):
            items.append(token)
            continue
        name, sep, value = token[2:].partition("=")
        if not sep:
            if not tokens or tokens[0].startswith("--"):
                raise ValueError(f"{token} needs a value: {token} VALUE, {token}=VALUE or {name.replace('-', '_')}=VALUE")
            value = tokens.pop(0)
        items.append(f"{name.replace('-', '_')}={value}")
    return items


def sac_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """
    The SB3 ``SAC`` arguments of a B-Pref config: shared by PEBBLE and its baseline, SAC on the true reward.

    :param config: settings from :func:`parse_overrides`
    """
    if config["agent.params.actor_lr"] != config["agent.params.critic_lr"]:
        raise ValueError("SB3's SAC has one learning rate: give agent.params.actor_lr == agent.params.critic_lr")
    actor = [config["diag_gaussian_actor.params.hidden_dim"]] * config["diag_gaussian_actor.params.hidden_depth"]
    critic = [config["double_q_critic.params.hidden_dim"]] * config["double_q_critic.params.hidden_depth"]
    return dict(
        learning_rate=config["agent.params.actor_lr"], buffer_size=config["num_train_steps"],
        learning_starts=config["num_seed_steps"], batch_size=config["agent.params.batch_size"],
        tau=config["agent.params.critic_tau"], gamma=config["agent.params.discount"],
        gradient_steps=config["gradient_update"], ent_coef=f"auto_{config['agent.params.init_temperature']}",
        target_update_interval=config["agent.params.critic_target_update_frequency"],
        policy_kwargs={"net_arch": {"pi": actor, "qf": critic}}, seed=config["seed"], device=config["device"],
    )  # fmt: skip


def make_pebble(config: dict[str, Any], env: VecEnv, **kwargs: Any) -> SAC_REWARD:
    """
    The :class:`~sb3_pref.SAC_REWARD` of a B-Pref PEBBLE run.

    :param config: settings from :func:`parse_overrides`
    :param env: the (dm_control, Meta-World or gymnasium) VecEnv
    :param kwargs: more ``SAC_REWARD`` arguments (``verbose``, ``tensorboard_log``, ...)
    """
    reward_model = RewardModel(
        env.observation_space, env.action_space, size_segment=config["segment"], activation=config["activation"],
        lr=config["reward_lr"], mb_size=config["reward_batch"], ensemble_size=config["ensemble_size"],
        teacher_beta=config["teacher_beta"], teacher_gamma=config["teacher_gamma"],
        teacher_eps_mistake=config["teacher_eps_mistake"], teacher_eps_skip=config["teacher_eps_skip"],
        teacher_eps_equal=config["teacher_eps_equal"],
        # .get: a config written before these two settings existed (a run's config.json) has B-Pref's network
        hidden_dim=config.get("reward_hidden_dim", BPREF_HIDDEN_DIM),
        n_layers=config.get("reward_hidden_depth", BPREF_N_LAYERS),
    )  # fmt: skip
    return SAC_REWARD(
        "MlpPolicy", env, reward_model=reward_model, **sac_kwargs(config),
        num_interaction=config["num_interact"], feed_type=config["feed_type"], re_update=config["reward_update"],
        max_feed=config["max_feedback"], unsuper_step=config["num_unsup_steps"], entropy_k=config["topK"],
        reset_update=config["reset_update"], reset_critic=config.get("reset_critic", True),
        first_round_uniform=config.get("first_round_uniform", True), metaworld_flag=config["env"].startswith("metaworld"),
        reward_schedule="bpref", feedback_schedule="bpref", **kwargs,
    )  # fmt: skip


__all__ = ["PEBBLE_DEFAULTS", "PEBBLE_TASKS", "QUICK_TASKS", "make_pebble", "parse_overrides", "sac_kwargs"]
