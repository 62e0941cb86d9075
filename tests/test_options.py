"""
The preference options declared once (``sb3_pref/common/options.py``): the algorithms' signatures, docstrings,
stored attributes, checks and B-Pref's flags all agree with the declaration, so none can drift from it.
"""

import inspect

import pytest
import torch as th
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
from sb3_pref.common.offpolicy import OffPolicyPreferenceMixin
from sb3_pref.common.onpolicy import PreferenceRewardMixin
from sb3_pref.common.options import (
    DOCS_MARKER,
    OFF_POLICY,
    ON_POLICY,
    OPTIONS_BY_NAME,
    PREFERENCE_OPTIONS,
    bpref_options,
    check_options,
    option_doc_lines,
    options_of,
)
from sb3_pref.rl2 import RL2

SMALL = dict(n_steps=64, batch_size=64, n_epochs=1, policy_kwargs={"net_arch": [16]}, seed=0)
#: the algorithm, its SB3 base (whose parameters it repeats), its family and its own extra parameters
ALGORITHMS = [(PPO_REWARD, PPO, ON_POLICY, {"value_loss"}), (SAC_REWARD, SAC, OFF_POLICY, set())]


def pendulum():
    return make_vec_env("Pendulum-v1", n_envs=1, seed=0)


@pytest.mark.parametrize("algorithm, base, family, own", ALGORITHMS)
def test_signatures_have_the_declared_options_with_their_types_and_defaults(algorithm, base, family, own):
    ours = inspect.signature(algorithm).parameters
    preference = {name: parameter for name, parameter in ours.items() if name not in inspect.signature(base).parameters}
    declared = {option.name: option for option in options_of(family)}
    assert set(preference) - own == set(declared), "the signature and the declaration list different options"
    for name, option in declared.items():
        assert preference[name].default == option.default_for(family), name
        assert preference[name].annotation == option.annotation, name
        assert preference[name].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD, name


@pytest.mark.parametrize(
    "cls, family",
    [
        (PPO_REWARD, ON_POLICY),
        (SAC_REWARD, OFF_POLICY),
        (RL2, ON_POLICY),
        (PreferenceRewardMixin, ON_POLICY),
        (OffPolicyPreferenceMixin, OFF_POLICY),
    ],
)
def test_help_documents_every_option_once_from_its_declaration(cls, family):
    doc = cls.__doc__
    assert DOCS_MARKER not in doc
    for option in options_of(family):
        assert doc.count(f":param {option.name}:") == 1, option.name
    # The generated lines are in the docstring as they are (with the class's indentation).
    for line in option_doc_lines(family):
        assert line.strip() in doc
    if cls in (PPO_REWARD, SAC_REWARD):
        for name in inspect.signature(cls).parameters:
            assert f":param {name}:" in doc, f"{cls.__name__}'s parameter {name} is not documented"
    mixin = inspect.signature(cls.__init__).parameters
    if cls in (PreferenceRewardMixin, OffPolicyPreferenceMixin):
        assert [name for name in mixin if name not in ("self", "args", "kwargs")] == [o.name for o in options_of(family)]


def test_every_option_is_stored_and_survives_save_load(tmp_path):
    env = pendulum()
    values = dict(
        num_interaction=500, num_feed=2, feed_type="entropy", re_update=7, metaworld_flag=True, max_feed=90,
        unsuper_step=64, unsuper_n_epochs=2, unsuper_reset_policy=True, max_ep_len=200, unsuper_flag=2,
        normalize_reward=True, anneal_reward_lr=True, segment_capacity=5000, entropy_k=3, reward_schedule="bpref",
        kl_coef=0.3, kl_target=0.05, kl_horizon=500, normalize_reward_before=True, whiten_reward=True,
        zero_value_head=True, anneal_policy_lr=True,
    )  # fmt: skip
    model = PPO_REWARD("MlpPolicy", env, reward_model_kwargs=dict(size_segment=10, mb_size=10), **values, **SMALL)
    stored = [option for option in options_of(ON_POLICY) if option.stored]
    assert set(values) <= {option.name for option in stored}
    # The options not given above are stored at their declared default.
    for option in stored:
        if option.name not in values and option.name not in ("reward_model", "reward_model_kwargs"):
            assert getattr(model, option.name) == option.default, option.name
    for name, value in values.items():
        assert getattr(model, name) == value, name
    model.save(tmp_path / "model")
    loaded = PPO_REWARD.load(tmp_path / "model", env=env)
    for name, value in values.items():
        assert getattr(loaded, name) == value, name
    # Normalised on the way in: a B-Pref script's 0/1 flag becomes a bool, an integral float an int.
    model = PPO_REWARD("MlpPolicy", env, reward_model_kwargs={}, normalize_reward=1, max_feed=1e3, **SMALL)
    assert model.normalize_reward is True and type(model.max_feed) is int


#: a value other than the default for every option that needs a reward model
MODEL_ONLY_VALUES = dict(
    teacher="oracle", num_interaction=500, feed_type=1, re_update=3, max_feed=100, size_segment=10,
    normalize_reward=True, anneal_reward_lr=True, segment_capacity=5000, rime=True,
    rune_beta=0.01, rune_decay=1e-5, qpa_episodes=10, surf=True, qpa_crops=20, rime_warm_start=True,
)  # fmt: skip


def test_the_options_that_need_a_reward_model_are_the_declared_ones():
    assert set(MODEL_ONLY_VALUES) == {option.name for option in PREFERENCE_OPTIONS if option.model_only}
    for name, value in MODEL_ONLY_VALUES.items():
        families = next(option.families for option in PREFERENCE_OPTIONS if option.name == name)
        # each on an algorithm that takes it (an off-policy one only on SAC_REWARD)
        algorithm, settings = (PPO_REWARD, SMALL) if ON_POLICY in families else (SAC_REWARD, dict(seed=0))
        with pytest.raises(ValueError, match=f"^{name} given without a reward model"):
            algorithm("MlpPolicy", pendulum(), **{name: value}, **settings)


@pytest.mark.parametrize("name, value", [("unsuper_n_epochs", 5), ("kl_coef", 0.5), ("normalize_reward_samples", "reference")])
def test_an_off_policy_algorithm_refuses_the_on_policy_options_by_name(name, value):
    class OpenSAC(OffPolicyPreferenceMixin, SAC):
        pass

    env = pendulum()
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10)
    with pytest.raises(ValueError, match=rf"{name}={value!r} is an on-policy option .* OpenSAC .*use PPO_REWARD"):
        OpenSAC("MlpPolicy", env, reward_model=reward_model, **{name: value})


def test_check_options_normalises_and_names_the_option():
    assert check_options({"max_feed": 1e3, "normalize_reward": 0, "kl_coef": 1}) == {
        "max_feed": 1000, "normalize_reward": False, "kl_coef": 1.0,
    }  # fmt: skip
    with pytest.raises(TypeError, match="entropy_k must be an integer"):
        check_options({"entropy_k": "5"})
    with pytest.raises(ValueError, match="reset_update must be an int >= 0, got -1"):
        check_options({"reset_update": -1})


def test_bpref_runs_set_the_options_of_their_flags():
    from sb3_pref.experiments.flags import build_parser, check_args

    args = build_parser("B-Pref").parse_args(
        ["--env", "Pendulum-v1", "--re-num-interaction", "2000", "--re-max-feed", "300", "--re-segment", "25",
         "--unsuper-step", "500", "--re-schedule", "auto", "--re-feed-type", "entropy"]
    )  # fmt: skip
    check_args(args)
    flags = vars(args)
    declared = [option for option in PREFERENCE_OPTIONS if option.bpref_flag is not None]
    assert all(option.bpref_flag in flags for option in declared), "a declared flag the B-Pref parser lacks"
    options = bpref_options(args)
    assert set(options) == {option.name for option in declared}
    assert (options["num_interaction"], options["max_feed"], options["size_segment"]) == (2000, 300, 25)
    assert (options["unsuper_step"], options["reward_schedule"], options["feed_type"]) == (500, "auto", "entropy")
    assert (options["max_ep_len"], options["metaworld_flag"]) == (200, False)
    # Without a reward model (B-Pref's PPO + pretraining baseline), only the options that work without one.
    without = bpref_options(args, model=False)
    assert "max_feed" not in without and without["unsuper_step"] == 500
    PPO_REWARD("MlpPolicy", pendulum(), **without, unsuper_flag=2, **SMALL)


def test_the_bpref_flags_default_to_bprefs_values_and_the_budget_to_the_options():
    """One default per option: ``--re-max-feed`` said 1000 where the option and B-Pref's script say 1400 (issue 43)."""
    from sb3_pref.experiments.flags import build_parser

    defaults = vars(build_parser("B-Pref").parse_args(["--env", "Pendulum-v1"]))
    assert defaults["re_max_feed"] == OPTIONS_BY_NAME["max_feed"].default == 1400
    # the flags that differ from the options' defaults are B-Pref's own schedule, which its command line keeps
    differing = {
        option.name
        for option in PREFERENCE_OPTIONS
        if option.bpref_flag
        and None not in (option.default, defaults.get(option.bpref_flag))
        and defaults[option.bpref_flag] != option.default
    }
    assert differing == {"feedback_schedule", "reward_schedule"}, differing


@pytest.mark.parametrize("algorithm", [PPO_REWARD, SAC_REWARD])
def test_n_eval_pairs_sets_how_many_pairs_measure_the_reward_model(algorithm):
    """
    An option added by its declaration and the two signatures only: it reaches the learner and acts there, and it
    only measures: its pairs come from their own stream, so the run with the diagnostic off is the same run.
    """
    env = pendulum()
    trained = []
    settings = dict(max_feed=40, num_interaction=64, unsuper_flag=0, re_update=2, teacher="oracle")
    settings.update(SMALL if algorithm is PPO_REWARD else dict(learning_starts=32, batch_size=32, seed=0))
    for n_eval_pairs in (0, 24):
        reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, hidden_dim=16)
        model = algorithm("MlpPolicy", env, reward_model=reward_model, n_eval_pairs=n_eval_pairs, **settings)
        assert model.n_eval_pairs == model.pref_learner.n_eval_pairs == n_eval_pairs
        measured: list[int] = []
        accuracy = reward_model.preference_accuracy

        def count(features_0, features_1, labels, accuracy=accuracy, measured=measured):
            if len(labels) != 10:  # the round's new labels are scored too; the fresh pairs are the others
                measured.append(len(labels))
            return accuracy(features_0, features_1, labels)

        reward_model.preference_accuracy = count
        model.learn(128)
        assert model.pref_learner.n_rounds == 2
        assert measured == ([] if n_eval_pairs == 0 else [24, 24])
        trained.append(
            [p.detach().clone() for p in (*model.policy.parameters(), *reward_model.ensemble.parameters())]
            + [th.as_tensor(model.pref_learner.dataset.labels)]
        )
    assert all(th.equal(off, on) for off, on in zip(*trained, strict=True)), "measuring the reward moved the run"
    with pytest.raises(ValueError, match="n_eval_pairs must be >= 0"):
        algorithm("MlpPolicy", env, reward_model=reward_model, n_eval_pairs=-1, **settings)
