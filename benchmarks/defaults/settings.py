"""
The defaults study's configurations (issue 41, and the judge and successor arms run through it): the tasks at the
budgets the issue names, the arms (what PPO_REWARD gets beyond the user's PPO) and the phases (which tasks, arms and
seeds run together). ``run.py`` runs them; a run's JSON records the settings it ran with and the commit.
"""

from typing import Any, Optional

# The PPO the user already has (the README demo's on dm_control; RL Zoo's tuned PPO on Pendulum-v1).
DMC_PPO: dict[str, Any] = dict(
    n_steps=250, batch_size=250, n_epochs=10, learning_rate=3e-4, gae_lambda=0.92,
    policy_kwargs={"net_arch": {"pi": [128, 128], "vf": [128, 128]}},
)  # fmt: skip
PENDULUM_PPO: dict[str, Any] = dict(
    n_steps=1024, batch_size=64, gae_lambda=0.95, gamma=0.9, n_epochs=10, learning_rate=1e-3, use_sde=True,
    sde_sample_freq=4,
)  # fmt: skip

#: task -> (env steps, label budget, envs, PPO settings, the best hand-set schedule of quality_grid/README.md at that budget)
TASKS: dict[str, dict[str, Any]] = {
    "cartpole_balance": dict(
        steps=120_000, labels=400, n_envs=8, ppo=DMC_PPO,
        # the README demo's schedule before issue 41 (benchmarks/demo/README.md)
        handset=dict(num_interaction=4000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=200, mb_size=25)),
    ),
    "Pendulum-v1": dict(
        steps=100_000, labels=200, n_envs=4, ppo=PENDULUM_PPO,
        handset=dict(num_interaction=4096, unsuper_step=8192, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=25)),
    ),
    "cartpole_swingup": dict(
        steps=400_000, labels=1000, n_envs=8, ppo=DMC_PPO,
        handset=dict(num_interaction=16000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=50)),
    ),
    # the peer's Pendulum-v1 tutorial budget (imitation's preference-comparisons tutorial: 50k steps, 200 comparisons,
    # its PPO settings; benchmarks/peer/peer_imitation.py)
    "Pendulum-v1-peer": dict(
        steps=50_000, labels=200, n_envs=8, handset=None,
        ppo=dict(n_steps=256, batch_size=64, ent_coef=0.01, learning_rate=2e-3, clip_range=0.1, gae_lambda=0.95,
                 gamma=0.97, n_epochs=10, policy_kwargs=dict(net_arch=[32, 32])),
    ),
    # SAC_REWARD against SAC, SB3's SAC defaults (pebble/README.md's Pendulum-v1 budget)
    "Pendulum-v1-sac": dict(steps=20_000, labels=200, n_envs=1, sac=True, handset=None),
    # issue 41's SAC bar: SAC_REWARD at its defaults against SB3's SAC on dm_control walker_stand, 100k steps, B-Pref's
    # 1000 labels (pebble/README.md measured PEBBLE's hand-set schedule there: 0.65 of SAC)
    "walker_stand-sac": dict(steps=100_000, labels=1000, n_envs=1, sac=True, handset=None),
    # a task nobody fitted the plan to, as most SB3 users first try one: gymnasium's MuJoCo Hopper-v5, one env, SB3's
    # PPO defaults (n_steps 2048, batch 64, 10 epochs, lr 3e-4), 200k steps, 500 labels; its episodes end when the
    # hopper falls, which no dm_control task does
    "Hopper-v5": dict(steps=200_000, labels=500, n_envs=1, ppo={}, handset=None),
    # the same, trained on Hopper-v5 at a fixed horizon (terminate_when_unhealthy=False: 1000 steps, a fallen hopper
    # earns no healthy reward), as the FAQ advises for envs that end early; evaluated on Hopper-v5 itself
    "Hopper-v5-fixed": dict(
        steps=200_000, labels=500, n_envs=1, ppo={}, handset=None, train_env_kwargs={"terminate_when_unhealthy": False}
    ),
    # ... and HalfCheetah-v5, whose episodes never end early (1000 steps) and whose returns can be negative
    "HalfCheetah-v5": dict(steps=200_000, labels=500, n_envs=1, ppo={}, handset=None),
    # the README's swap snippet as written: walker_walk, 8 envs, PPO with n_steps=500 (SB3's defaults otherwise),
    # 1M steps, B-Pref's 1000 labels; issue 41's bar is 0.9 of PPO with the same settings, 3 seeds side by side
    "walker_walk": dict(steps=1_000_000, labels=1000, n_envs=8, ppo=dict(n_steps=500), handset=None),
    # issue 41's item 4 task walker_stand at 500k, 1000 labels, as quality_grid/README.md ran it: the demo's PPO with
    # observations normalised (VecNormalize, not the reward: without it PPO reaches 250 at 600k), and that grid's
    # hand-set schedule (100 labels, then 50 every 16k steps until ~296k)
    "walker_stand": dict(
        steps=500_000, labels=1000, n_envs=8, ppo=DMC_PPO, normalize_obs=True,
        handset=dict(num_interaction=16000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=50)),
    ),
}  # fmt: skip

#: arm -> what PPO_REWARD gets beyond the user's PPO (None: PPO on the true reward)
ARMS: dict[str, Optional[dict[str, Any]]] = {
    "ppo": None,
    "defaults": {},  # only the reward model, the teacher and the budget
    # the first candidate: the planned schedule with uniform queries (dev seeds, and report seed 100 on cartpole)
    "defaults_uniform": {"feed_type": "uniform"},
    "handset": {"handset": True},
    # candidates after dev seed 11 and fresh seed 103 stayed below their start: the 8 rounds after the first spread
    # over more of the run (cartpole_balance 120k / 400 labels: the plan's last label at 40k, 1/3 of the run)
    "window_half": {"num_interaction": 6000, "model": dict(initial_mb_size=200, mb_size=25)},  # last label at 56k
    "window_two_thirds": {"num_interaction": 9000, "model": dict(initial_mb_size=200, mb_size=25)},  # ... at 80k
    "random_teacher": {"random_teacher": True},  # the floor: labels at random, the defaults otherwise
    # candidates after the README snippet's walker_walk stayed at 0.57 of PPO and swing-up lost its mid-run level by
    # the end: the plan as it is, with its last label not at a third of the run (LABEL_WINDOW) but at two thirds or at
    # nine tenths of it (the plan's window for this run only; nothing else given)
    "label_window_two_thirds": {"label_window": 2 / 3},
    "label_window_nine_tenths": {"label_window": 0.9},
    # after the label window: walker_walk's reward ranks the policy's own segments at 0.67-0.84, and the library's
    # reward network (3 members of 2x64, chosen on cartpole and Pendulum) is small for 30 inputs: B-Pref's 3x256
    "bpref_net": {"model": dict(hidden_dim=256, n_layers=3, lr=3e-4)},
    # walker_walk's learned reward stops rising with the true one above about 0.3 (reward_shape.py): the reward
    # model's inputs standardised (velocities reach 10 where orientations stay within 1)
    "input_norm": {"model": dict(input_norm=True)},
    # walker_stand at 500k: the grid's hand-set schedule (100 labels, then 50 every 16k until ~296k) ended at 1.8x the
    # defaults on fresh seeds 101-105; which of its two differences matters, screened on development seeds: the last
    # label at six tenths of the run (about the hand-set's), or a first round of 100 (the plan: 250)
    "label_window_six_tenths": {"label_window": 0.6},
    "first_round_100": {"model": dict(initial_mb_size=100)},
    # the hand-set schedule beat the defaults on 12 of 15 walker_stand seeds, the first round of 100 alone on 10 of 15:
    # is the rest its many small rounds (the plan's first round of 250, then 50 every 16k until 250k), or its later
    # window with a small first round (100, then the plan's 8 rounds until six tenths of the run)?
    "many_rounds": {"num_interaction": 16000, "model": dict(initial_mb_size=250, mb_size=50)},
    "first_round_100_six_tenths": {"label_window": 0.6, "model": dict(initial_mb_size=100)},
    # walker_walk ends lower with a first round of 100 than of 250 (dev_snippet_first_round, dev_long_shape_walk):
    # does it gain from a larger one (the other 500 planned around it)?
    "first_round_500": {"model": dict(initial_mb_size=500)},
    # swing-up ends higher with 250 labels than with 1000 (the protocol's seeds 100-104: 647.8 against 529.8): the
    # 750 labels after the first in rounds of 25, the demo's round size (30 rounds every 4k until 130k), not 8 of 94
    "rounds_of_25": {"model": dict(initial_mb_size=250, mb_size=25)},
    # swing-up's policies swing between about 800 and 200 after the last label while the learned reward ranks their
    # episodes right (episodes/, Spearman 0.92-0.98): the defaults, and the policy the learned reward judges best kept
    # (LearnedRewardEvalCallback, 5 episodes every 5% of the run); both the last and the kept policy are evaluated
    "learned_best": {"learned_best": True},
    # ... the floor, judged by its own learned reward (a random teacher's)
    "random_teacher_learned_best": {"random_teacher": True, "learned_best": True},
    # ... and PPO with SB3's EvalCallback keeping its best by the true reward, the same judging schedule
    "ppo_true_best": {"true_best": True},
    # walker_stand's plan draws its first 250 labels from 10k pretraining steps in which the walker lies on the floor:
    # pretraining a fifteenth of the run without the 10k cap (34k steps at 500k, 26k at 400k, 66k at 1M; the runs of
    # 150k steps and fewer, the demo's included, keep their plan), so the first round's states are more varied
    "pretrain_uncapped": {"pretrain_cap": 10**9},
    # SAC_REWARD stalls crouching on walker_stand because its labels hold few standing states (sac_stall.py): RUNE's
    # exploration bonus, the ensemble's std, with its PEBBLE settings (beta_0 = 0.05, decay 1e-5 per step; issue 44)
    "rune_pebble": {"rune_beta": 0.05, "rune_decay": 1e-5},
    # issue 44's RIME with PEBBLE: B-Pref's mistake teacher (10% of answers flipped), without and with RIME's filter
    "mistake10": {"teacher_kwargs": {"eps_mistake": 0.1}},
    "mistake10_rime": {"teacher_kwargs": {"eps_mistake": 0.1}, "rime": True},
    # issue 44's walker_stand arms for PEBBLE: QPA (queries and hybrid replay from the last 10 episodes, its DMC
    # setting) and RIME's warm start (the reward model regressed onto the entropy reward, the critic kept)
    "qpa": {"qpa_episodes": 10},
    "rime_warm": {"rime_warm_start": True, "reset_critic": False},
}

PHASES = {
    "dev": dict(seeds=range(5), arms=("defaults", "defaults_uniform"), tasks=("cartpole_balance", "Pendulum-v1")),
    # after the fresh seed 103 stayed below its start: how often the defaults fail there, on more dev seeds
    "dev_wide": dict(seeds=range(5, 17), arms=("defaults",), tasks=("cartpole_balance",)),
    # the candidates on the slow or failed dev seeds (11, 4, 10, 16) and four that learned (0, 1, 5, 7)
    "dev_window": dict(seeds=(11, 4, 10, 16, 0, 1, 5, 7), arms=("window_half",), tasks=("cartpole_balance",)),
    # cartpole_balance's hand-set schedule is the defaults' plan at this budget, query selection included: no arm of its own
    "report": dict(seeds=range(101, 106), arms=("ppo", "defaults", "random_teacher"), tasks=("cartpole_balance",)),
    # five more fresh seeds on cartpole_balance after seed 103 (nothing was chosen on them)
    "report_more": dict(seeds=range(106, 111), arms=("ppo", "defaults", "random_teacher"), tasks=("cartpole_balance",)),
    "report_pendulum": dict(
        seeds=range(101, 106), arms=("ppo", "defaults", "handset", "random_teacher"), tasks=("Pendulum-v1",)
    ),
    "report_peer": dict(seeds=range(101, 104), arms=("ppo", "defaults", "random_teacher"), tasks=("Pendulum-v1-peer",)),
    "report_sac": dict(seeds=range(101, 104), arms=("ppo", "defaults"), tasks=("Pendulum-v1-sac",)),
    "report_long": dict(seeds=range(101, 104), arms=("ppo", "defaults", "handset"), tasks=("cartpole_swingup",)),
    # issue 44: RIME with PEBBLE (SAC_REWARD) on Pendulum-v1, beside report_sac's SAC and oracle arms on the same seeds
    "report_sac_rime": dict(
        seeds=range(101, 104), arms=("mistake10", "mistake10_rime", "random_teacher"), tasks=("Pendulum-v1-sac",)
    ),
    # about 1,800 CPU s per run (pebble/README.md): SAC and SAC_REWARD of a seed side by side, then the floor
    "report_walker_sac": dict(seeds=range(101, 104), arms=("ppo", "defaults", "random_teacher"), tasks=("walker_stand-sac",)),
    # two more fresh seeds for the SAC bar (0.89 of SAC over 101-103, against 0.9), SAC and SAC_REWARD side by side
    "report_walker_sac_more": dict(seeds=range(104, 106), arms=("ppo", "defaults"), tasks=("walker_stand-sac",)),
    # issue 44: QPA and RIME's warm start on PEBBLE's walker_stand gap, beside report_walker_sac's arms on its seeds
    "report_walker_successors": dict(seeds=range(101, 104), arms=("qpa", "rime_warm"), tasks=("walker_stand-sac",)),
    # the label window on the snippet's task, development seeds (the choice is made here, reported on 101+)
    "dev_snippet": dict(
        seeds=range(5), arms=("defaults", "label_window_two_thirds", "label_window_nine_tenths"), tasks=("walker_walk",)
    ),
    "dev_snippet_net": dict(seeds=range(2), arms=("bpref_net",), tasks=("walker_walk",)),
    # walker_stand's lead (a first round of 100, dev_walker_stand) on the snippet's task
    "dev_snippet_first_round": dict(seeds=range(2), arms=("first_round_100",), tasks=("walker_walk",)),
    # ... and a larger one (a first round of 100 ended below the plan's 250 there)
    "dev_snippet_first_round_500": dict(seeds=range(2), arms=("first_round_500",), tasks=("walker_walk",)),
    # about 6 CPU-minutes per run on the AVX512-BF16 machine: a seed's PPO and PPO_REWARD side by side, one per core
    "report_snippet": dict(seeds=range(101, 104), arms=("ppo", "defaults"), tasks=("walker_walk",)),
    # the floor beside it, after the pairs
    "report_snippet_floor": dict(seeds=range(101, 104), arms=("random_teacher",), tasks=("walker_walk",)),
    # the hand-set schedule's two differences from the plan, on development seeds (nothing reported from them)
    "dev_walker_stand": dict(
        seeds=range(5),
        arms=("defaults", "handset", "label_window_six_tenths", "first_round_100"),
        tasks=("walker_stand",),
    ),
    # which of the hand-set schedule's other parts carries its walker_stand lead (development seeds)
    "dev_walker_stand_rounds": dict(
        seeds=range(5), arms=("many_rounds", "first_round_100_six_tenths"), tasks=("walker_stand",)
    ),
    # dev_walker_stand_rounds' lead (a first round of 100 and the labels until six tenths of the run) on the other
    # long runs' development seeds: the README snippet's walker_walk (0-1, as dev_snippet) and swing-up (0-4, whose
    # defaults ran in the successors study's swingup_dev on this machine type)
    "dev_long_shape_walk": dict(seeds=range(2), arms=("first_round_100_six_tenths",), tasks=("walker_walk",)),
    "dev_long_shape_swingup": dict(seeds=range(5), arms=("first_round_100_six_tenths",), tasks=("cartpole_swingup",)),
    # SAC_REWARD on walker_stand stalls near 450 on two of five fresh seeds (report_walker_sac, _more); its plan, too,
    # draws its first 250 labels from the pretraining's states, where the walker lies on the floor: a first round of
    # 100 (chosen on PPO's walker_stand development seeds, dev_walker_stand) on the same fresh seeds
    "report_walker_sac_first_round": dict(seeds=range(101, 106), arms=("first_round_100",), tasks=("walker_stand-sac",)),
    # two more development seeds of walker_walk for the long shape's verdict there (it rested on seeds 0-1)
    "dev_long_shape_walk_more": dict(
        seeds=range(2, 4), arms=("defaults", "first_round_100_six_tenths"), tasks=("walker_walk",)
    ),
    # dev_walker_stand_rounds' lead on walker_stand's fresh seeds, beside report_walker_stand's arms on the same seeds
    # (it ran as two one-worker invocations over seeds 101-105 and 106-110, one per core; the results are the same files)
    "report_walker_stand_long_shape": dict(
        seeds=range(101, 111), arms=("first_round_100_six_tenths",), tasks=("walker_stand",)
    ),
    # cartpole_balance's failures (3 of 19 unchosen seeds below their start): "200 first, then 25 every 8k" (the plan
    # with its last label at six tenths of the run) ended above its start on all 13 seeds of the guard's screen; the
    # two side by side on 40 new development seeds of this machine (it lost there, so no other task ran it)
    "dev_six_tenths_balance": dict(
        seeds=range(40, 80), arms=("defaults", "label_window_six_tenths"), tasks=("cartpole_balance",)
    ),
    # the six tenths ended below the defaults (8 of 35 seeds short of start + 250 against 5): PPO on the true reward
    # on the same development seeds, how often the user's PPO itself stays near its start at this budget
    "dev_balance_ppo": dict(seeds=range(40, 80), arms=("ppo",), tasks=("cartpole_balance",)),
    "dev_rounds_of_25_swingup": dict(seeds=range(5), arms=("rounds_of_25",), tasks=("cartpole_swingup",)),
    "dev_learned_best_swingup": dict(seeds=range(5), arms=("learned_best",), tasks=("cartpole_swingup",)),
    "report_learned_best_swingup": dict(seeds=range(105, 110), arms=("learned_best",), tasks=("cartpole_swingup",)),
    "report_true_best_swingup": dict(seeds=range(105, 110), arms=("ppo_true_best",), tasks=("cartpole_swingup",)),
    # the judge on the README snippet's walker_walk (its curves flatten rather than swing), the snippet's fresh seeds
    "report_learned_best_snippet": dict(seeds=range(101, 104), arms=("learned_best",), tasks=("walker_walk",)),
    "report_learned_best_swingup_floor": dict(
        seeds=range(105, 110), arms=("random_teacher_learned_best",), tasks=("cartpole_swingup",)
    ),
    # pretrain_uncapped on the long runs' development seeds: walker_stand and swing-up 0-4, the README snippet 0-1
    "dev_pretrain_uncapped": dict(seeds=range(5), arms=("pretrain_uncapped",), tasks=("walker_stand", "cartpole_swingup")),
    "dev_pretrain_uncapped_snippet": dict(seeds=range(2), arms=("pretrain_uncapped",), tasks=("walker_walk",)),
    # rune_pebble on walker_stand-sac's fresh seeds, after its development screen to 50k steps (sac_stall.py, seeds 0-2)
    "report_walker_sac_rune": dict(seeds=range(101, 106), arms=("rune_pebble",), tasks=("walker_stand-sac",)),
    # the labels until two thirds of the run, not a third, on walker_stand-sac's fresh seeds: run only if its
    # development screen (sac_stall.py --arm window_two_thirds, seeds 0-2 at 50k) is ahead of the defaults on two of
    # three seeds and on the mean, the rule RUNE's screen had
    "report_walker_sac_window": dict(seeds=range(101, 106), arms=("label_window_two_thirds",), tasks=("walker_stand-sac",)),
    # two more fresh seeds for the window's verdict there (ahead on 3 of 101-105, one loss of 359): the window and the
    # defaults side by side first, then SAC on the same seeds
    "report_walker_sac_window_more": dict(
        seeds=range(106, 108), arms=("defaults", "label_window_two_thirds"), tasks=("walker_stand-sac",)
    ),
    "report_walker_sac_window_more_sac": dict(seeds=range(106, 108), arms=("ppo",), tasks=("walker_stand-sac",)),
    # ... and the same window on SAC_REWARD's other task, development seeds, beside the defaults (Pendulum-v1-sac has no
    # development runs of its own: its report seeds were chosen on nothing)
    "dev_sac_window_pendulum": dict(seeds=range(5), arms=("defaults", "label_window_two_thirds"), tasks=("Pendulum-v1-sac",)),
    # the window on Pendulum-v1-sac's fresh seeds, beside report_sac's SAC and defaults arms (after its development
    # screen came out level: -143.1 against -143.0 over seeds 0-4)
    "report_sac_window_pendulum": dict(seeds=range(101, 104), arms=("label_window_two_thirds",), tasks=("Pendulum-v1-sac",)),
    # walker_stand's PPO swings between about 180 and 780 at 500k (report_walker_stand): the judge there, with the
    # VecNormalize statistics of the kept policy's time; development seeds first, then the fresh seeds of
    # report_walker_stand beside PPO kept by SB3's EvalCallback on the same schedule
    "dev_learned_best_walker_stand": dict(seeds=range(5), arms=("learned_best",), tasks=("walker_stand",)),
    "report_learned_best_walker_stand": dict(
        seeds=range(101, 104), arms=("learned_best", "ppo_true_best"), tasks=("walker_stand",)
    ),
    # issue 41's walker_stand at 500k beside PPO and the grid's hand-set schedule (nothing is chosen: the defaults as
    # they are), then the floor; about 2 CPU-minutes per run on the AVX512-BF16 machine
    "report_walker_stand": dict(
        seeds=range(101, 106), arms=("ppo", "defaults", "handset", "random_teacher"), tasks=("walker_stand",)
    ),
    # dev_walker_stand's lead (a first round of 100: above the defaults on all five dev seeds, 413.2 against 255.8) on
    # the fresh seeds, after the more seeds below
    "report_walker_stand_first_round": dict(seeds=range(101, 111), arms=("first_round_100",), tasks=("walker_stand",)),
    # five more fresh seeds: the hand-set schedule's lead over 101-105 rests on three of its seeds (676-800)
    "report_walker_stand_more": dict(
        seeds=range(106, 111), arms=("ppo", "defaults", "handset", "random_teacher"), tasks=("walker_stand",)
    ),
    # the plan on a task it was not fitted to: Hopper-v5 with SB3's PPO defaults (nothing chosen: fresh seeds only)
    "report_hopper": dict(seeds=range(101, 106), arms=("ppo", "defaults", "random_teacher"), tasks=("Hopper-v5",)),
    # the FAQ's advice for envs that end early, measured: train at a fixed horizon (report_hopper's seeds)
    "report_hopper_fixed": dict(seeds=range(101, 106), arms=("defaults", "random_teacher"), tasks=("Hopper-v5-fixed",)),
    # the same on HalfCheetah-v5, whose episodes never end early
    "report_halfcheetah": dict(seeds=range(101, 104), arms=("ppo", "defaults", "random_teacher"), tasks=("HalfCheetah-v5",)),
}
