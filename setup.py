import os

from setuptools import find_packages, setup

with open(os.path.join("sb3_pref", "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

with open("README.md", encoding="utf-8") as file_handler:
    long_description = file_handler.read()

# Meta-World 3.1.1 pins MuJoCo 3.3.0, and every dm-control release after 1.0.28 needs a newer MuJoCo
# (1.0.30: >= 3.3.2, 1.0.31: >= 3.3.3, ..., 1.0.50 reads fields 3.3.0 lacks). Both extras therefore pin
# the one pair built for each other, so that installing them in any order, or one after the other,
# never makes pip change the MuJoCo under an installed dm-control. sb3_pref.envs checks the pair at import.
MUJOCO_PIN = "mujoco==3.3.0"
DM_CONTROL_PIN = "dm-control==1.0.28"
# SB3's learn(progress_bar=True) needs tqdm and rich, which SB3 keeps in its own optional extra: every extra that
# trains for minutes brings them.
PROGRESS = ["tqdm", "rich"]
extras = {
    "dmc": [DM_CONTROL_PIN, MUJOCO_PIN, *PROGRESS],
    # Meta-World 3.x builds its envs with gymnasium 1.1's API
    "metaworld": ["metaworld>=3.1.1,<3.2", MUJOCO_PIN, "gymnasium>=1.1", *PROGRESS],
    "plots": ["matplotlib>=3.5"],
    # pygame-ce (the fork gymnasium and SB3 depend on) renders gymnasium's classic-control envs;
    # Pillow writes the GIF fallback of the clips.
    "human": ["flask>=2.2", "imageio>=2.20", "imageio-ffmpeg>=0.4.9", "pillow>=9", "pygame-ce>=2.1.3"],
}
extras["all"] = sorted({dep for deps in extras.values() for dep in deps})
# RL Zoo (python -m rl_zoo3.train --algo ppo_reward): its release matches SB3's. pandas: the report that
# -optimize writes after its trials (optuna's trials_dataframe), and requests: what rl_zoo3.enjoy imports
# (load_from_hub), neither of which rl_zoo3 requires itself.
extras["zoo"] = ["rl_zoo3>=2.7", "pyyaml>=5.4", "pandas>=1.5", "requests>=2.25"]
# Grid runner: YAML configs, plots, and Ray for clusters (kept out of "all": Ray is a large install).
extras["experiments"] = ["pyyaml>=5.4", "matplotlib>=3.5", "ray>=2.9"]
extras["docs"] = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"]
extras["tests"] = [
    *extras["all"],
    *extras["experiments"],
    *extras["docs"],
    *extras["zoo"],
    *["pytest>=7", "pytest-timeout", "pytest-xdist>=3", "ruff>=0.6", "mypy>=1.10"],
    *["tensorboard", "tqdm", "rich", "playwright>=1.40"],
]

setup(
    name="sb3_pref",
    version=__version__,
    description="Preference-based and meta reinforcement learning for Stable-Baselines3",
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=find_packages(include=["sb3_pref", "sb3_pref.*"]),
    package_data={"sb3_pref": ["py.typed", "version.txt", "zoo/hyperparams/*.yml", "human/static/*.html"]},
    python_requires=">=3.9",
    install_requires=[
        # 2.7 is the first release with the LinearSchedule class sb3_pref imports (2.4-2.6 fail at import).
        "stable-baselines3>=2.7",
        "sb3-contrib>=2.7",
        "gymnasium>=1.0",
        # A floor only: an existing torch install is kept as it is.
        "torch>=2.3",
        "numpy>=1.20",
        # Reads the installed dm-control/Meta-World requirements (sb3_pref.envs.versions).
        "packaging>=20",
    ],
    extras_require=extras,
    # SPDX expression (PEP 639), which replaces the license classifier; needs setuptools>=77 (pyproject.toml).
    license_expression="MIT",
    license_files=["LICENSE"],
    project_urls={
        "Stable-Baselines3": "https://github.com/DLR-RM/stable-baselines3",
        "B-Pref (original code)": "https://github.com/rll-research/BPref",
        "RL Zoo": "https://github.com/DLR-RM/rl-baselines3-zoo",
    },
    keywords="reinforcement-learning preference-based-rl rlhf meta-rl stable-baselines3 gymnasium pytorch",
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Science/Research",
        "Operating System :: OS Independent",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Typing :: Typed",
    ],
)
