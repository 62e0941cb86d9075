import json

import numpy as np
import pytest
from gymnasium import spaces

from sb3_pref.core.preprocessing import FeatureEncoder, describe_space, space_from_description


def test_box_and_int_dims_flatten_to_float32_rows():
    encoder = FeatureEncoder(spaces.Box(-1, 1, shape=(2, 3)), spaces.Box(-1, 1, shape=(2,)))
    assert (encoder.obs_dim, encoder.act_dim, encoder.input_dim) == (6, 2, 8)
    obs = np.arange(4 * 6, dtype=np.float64).reshape(4, 2, 3)
    actions = -np.arange(8, dtype=np.float64).reshape(4, 2)
    features = encoder.encode(obs, actions)
    assert features.dtype == np.float32
    np.testing.assert_array_equal(features, np.concatenate([obs.reshape(4, 6), actions], axis=1))

    by_size = FeatureEncoder(5, np.int64(2))
    assert (by_size.obs_dim, by_size.act_dim) == (5, 2)
    assert by_size.observation_space.shape == (5,) and by_size.action_space.shape == (2,)
    for obs_arg, act_arg, name in [(0, 2, "observation_space"), (3, -1, "action_space"), ("4", 2, "observation_space")]:
        with pytest.raises(ValueError, match=name):
            FeatureEncoder(obs_arg, act_arg)


def test_discrete_one_hot_respects_start():
    encoder = FeatureEncoder(3, spaces.Discrete(4, start=-1))
    assert encoder.act_dim == 4
    actions = np.array([-1, 2, 0, 1])
    expected = np.eye(4, dtype=np.float32)[[0, 3, 1, 2]]
    np.testing.assert_array_equal(encoder.encode_actions(actions), expected)
    # SB3 hands discrete actions over as (n, 1) as often as (n,)
    np.testing.assert_array_equal(encoder.encode_actions(actions[:, None]), expected)
    # a Discrete observation is one-hot encoded too
    obs_encoder = FeatureEncoder(spaces.Discrete(3, start=5), 1)
    np.testing.assert_array_equal(obs_encoder.encode_obs(np.array([7, 5])), [[0, 0, 1], [1, 0, 0]])


def test_multidiscrete_and_multibinary():
    encoder = FeatureEncoder(spaces.MultiBinary(3), spaces.MultiDiscrete([2, 3]))
    assert (encoder.obs_dim, encoder.act_dim) == (3, 5)
    actions = np.array([[1, 2], [0, 0], [1, 1]])
    np.testing.assert_array_equal(
        encoder.encode_actions(actions),
        [[0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 1, 0, 1, 0]],
    )
    np.testing.assert_array_equal(encoder.encode_obs(np.array([[1, 0, 1]], dtype=np.int8)), [[1.0, 0.0, 1.0]])

    shifted = FeatureEncoder(3, spaces.MultiDiscrete([2, 3], start=[1, -1]))
    np.testing.assert_array_equal(
        shifted.encode_actions(np.array([[2, -1], [1, 1]])),
        [[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]],
    )


def test_encodings_match_gymnasium_flatten_for_every_supported_space():
    # gymnasium's own flatten is the reference layout: one-hot discretes, Dict keys in the space's order
    obs_space = spaces.Dict(
        {
            "vel": spaces.Box(-1, 1, shape=(1,)),
            "mode": spaces.Discrete(3, start=2),
            "pos": spaces.Box(-1, 1, shape=(2, 2)),
            "gear": spaces.MultiDiscrete([2, 4], start=[0, 1]),
            "flags": spaces.MultiBinary(2),
        },
        seed=0,
    )
    assert list(obs_space.spaces) == ["flags", "gear", "mode", "pos", "vel"]
    action_space = spaces.Discrete(5, start=1, seed=1)
    encoder = FeatureEncoder(obs_space, action_space)
    assert encoder.obs_dim == 2 + 6 + 3 + 4 + 1 == spaces.flatdim(obs_space)

    samples = [obs_space.sample() for _ in range(6)]
    actions = np.array([action_space.sample() for _ in range(6)])
    batch = {key: np.stack([sample[key] for sample in samples]) for key in obs_space.spaces}
    # insertion order of the batch dict must not matter
    batch = dict(reversed(list(batch.items())))
    features = encoder.encode(batch, actions)
    expected = np.stack(
        [
            np.concatenate([spaces.flatten(obs_space, sample), spaces.flatten(action_space, action)])
            for sample, action in zip(samples, actions)
        ]
    )
    np.testing.assert_array_equal(features, expected.astype(np.float32))


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(0, 1, shape=(3, 2)),
        spaces.Discrete(4, start=-2),
        spaces.MultiDiscrete([3, 2], start=[1, 0]),
        spaces.MultiBinary(4),
        spaces.Dict(
            {"b": spaces.Box(-1, 1, shape=(2,)), "a": spaces.Dict({"d": spaces.Discrete(2), "c": spaces.Box(0, 1, (1,))})}
        ),
    ],
    ids=["box", "discrete", "multidiscrete", "multibinary", "nested-dict"],
)
def test_describe_space_round_trip(space):
    description = describe_space(space)
    # plain data only: it is stored in a weights_only checkpoint
    assert json.loads(json.dumps(description)) == description
    rebuilt = space_from_description(description)
    assert type(rebuilt) is type(space)
    assert describe_space(rebuilt) == description
    assert spaces.flatdim(rebuilt) == spaces.flatdim(space)
    space.seed(3)
    values = [space.sample() for _ in range(5)]
    original, restored = FeatureEncoder(space, 1), FeatureEncoder(rebuilt, 1)
    if isinstance(space, spaces.Dict):
        batch = {key: values_of(values, key) for key in space.spaces}
    else:
        batch = np.stack(values)
    np.testing.assert_array_equal(restored.encode_obs(batch), original.encode_obs(batch))


def values_of(samples: list, key: str):
    values = [sample[key] for sample in samples]
    if isinstance(values[0], dict):
        return {sub: np.stack([value[sub] for value in values]) for sub in values[0]}
    return np.stack(values)


def test_shape_mismatch_and_unsupported_spaces_raise():
    encoder = FeatureEncoder(spaces.Box(-1, 1, shape=(3,)), spaces.Box(-1, 1, shape=(2,)))
    with pytest.raises(ValueError, match=r"obs has shape \(5, 4\).*\(3,\)"):
        encoder.encode_obs(np.zeros((5, 4)))
    with pytest.raises(ValueError, match=r"actions has shape \(5, 7\)"):
        encoder.encode_actions(np.zeros((5, 7)))
    dict_encoder = FeatureEncoder(spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "vel": spaces.Box(-1, 1, (1,))}), 1)
    with pytest.raises(ValueError, match=r"obs\['pos'\]"):
        dict_encoder.encode_obs({"pos": np.zeros((4, 3)), "vel": np.zeros((4, 1))})
    nested = FeatureEncoder(spaces.Dict({"arm": spaces.Dict({"joint": spaces.Box(-1, 1, (2,))})}), 1)
    with pytest.raises(ValueError, match=r"obs\['arm'\]\['joint'\] has shape \(4, 5\)"):
        nested.encode_obs({"arm": {"joint": np.zeros((4, 5))}})

    image = spaces.Box(0, 255, shape=(3, 16, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match="observation_space is an image space"):
        FeatureEncoder(image, 2)
    with pytest.raises(ValueError, match=r"observation_space\['camera'\] is an image space"):
        FeatureEncoder(spaces.Dict({"camera": image, "state": spaces.Box(-1, 1, (2,))}), 2)
    with pytest.raises(ValueError, match="action_space of type Tuple is not supported"):
        FeatureEncoder(3, spaces.Tuple([spaces.Discrete(2), spaces.Discrete(3)]))
    # a float 3-d Box is not an image: it is flattened like any other Box
    assert FeatureEncoder(spaces.Box(0, 1, shape=(3, 4, 5)), 1).obs_dim == 60
