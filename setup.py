import os

from setuptools import find_packages, setup

with open(os.path.join("sb3_pref", "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

with open("README.md", encoding="utf-8") as file_handler:
    long_description = file_handler.read()

# dm-control releases after 1.0.28 need MuJoCo >= 3.3.2 while Meta-World 3.1.1 pins 3.3.0,
# and MuJoCo 4 drops fields dm-control reads: the bounds below are the range both run on.
mujoco_range = "mujoco>=3.3,<4"
extras = {
    "dmc": ["dm-control>=1.0.28", mujoco_range],
    "metaworld": ["metaworld>=3.1.1", mujoco_range],
    "plots": ["matplotlib>=3.5"],
    # pygame renders gymnasium's classic-control envs; Pillow writes the GIF fallback of the clips.
    "human": ["flask>=2.2", "imageio>=2.20", "imageio-ffmpeg>=0.4.9", "pillow>=9", "pygame>=2.1"],
}
extras["all"] = sorted({dep for deps in extras.values() for dep in deps})
# Grid runner: YAML configs, plots, and Ray for clusters (kept out of "all": Ray is a large install).
extras["experiments"] = ["pyyaml>=5.4", "matplotlib>=3.5", "ray>=2.9"]
extras["docs"] = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"]
extras["tests"] = [
    *extras["all"],
    *extras["experiments"],
    *extras["docs"],
    *["pytest>=7", "pytest-timeout", "ruff>=0.6", "tensorboard", "tqdm", "rich", "playwright>=1.40"],
]

setup(
    name="sb3_pref",
    version=__version__,
    description="Preference-based and meta reinforcement learning for Stable-Baselines3",
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=find_packages(include=["sb3_pref", "sb3_pref.*"]),
    package_data={"sb3_pref": ["py.typed", "version.txt", "human/static/*.html"]},
    python_requires=">=3.9",
    install_requires=[
        "stable-baselines3>=2.4",
        "sb3-contrib>=2.4",
        "gymnasium>=1.0",
        # A floor only: an existing torch install is kept as it is.
        "torch>=2.3",
        "numpy>=1.20",
    ],
    extras_require=extras,
    license="MIT",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
