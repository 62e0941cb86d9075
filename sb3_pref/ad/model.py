"""
The Algorithm Distillation transformer: a causal transformer over ``(observation, action, reward)``
tokens that predicts each action from everything before it.

A window of ``L`` transitions becomes ``3 L`` tokens ``o_1, a_1, r_1, o_2, ...`` (the seed's
``token_layout="triplet"``). Each kind has its own embedding (observations through a linear layer,
actions and, by default on DarkRoom, rewards as categories), and all three tokens of a transition add
the embedding of the env's own time step inside the episode: that is the only position signal (no
absolute positions, no return-to-go), so a window means the same wherever it was cut from a long
history, and left padding changes nothing.

``token_layout="transition"`` sums ``o_t``, the previous action ``a_{t-1}`` and the previous reward
``r_{t-1}`` into one token per transition (what a trial observation reports at each step), with a
learned "none" action and reward where there is no previous transition in the window. It sees the
same information, one step later for the last action, and has a third of the tokens: attention, the
cost that grows with the context, is about nine times cheaper.
"""

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

import torch as th
import torch.nn.functional as F
from torch import nn

#: the ways a window of transitions becomes tokens (see the module's docstring)
TOKEN_LAYOUTS = ("triplet", "transition")


@dataclass
class ADConfig:
    """
    Sizes of the model. The defaults are the seed's preset for DarkRoom.

    :param obs_dim: width of a (flattened) observation
    :param n_actions: number of discrete actions
    :param max_timestep: time steps ``0 .. max_timestep - 1`` inside an episode get an embedding
    :param n_reward_values: > 0: rewards are categories (indices into the histories' reward values);
        0: rewards go through a linear layer
    :param seq_len: transitions per window (tokens = 3 x seq_len)
    :param embed_dim: token width
    :param n_layers: transformer blocks
    :param n_heads: attention heads
    :param ff_dim: hidden width of the feed-forward layers
    :param attention_dropout: dropout on the attention weights
    :param residual_dropout: dropout on each block's residual branches
    :param embedding_dropout: dropout on the summed token embeddings
    :param recency_bias: add ALiBi's distance penalty to attention (not the seed's: it only uses the
        env's time step; small models trained briefly need it to bind a reward to its own transition)
    :param token_layout: ``"triplet"`` (the seed's: three tokens per transition) or ``"transition"``
        (one token per transition: the observation with the previous action and reward)
    """

    obs_dim: int
    n_actions: int
    max_timestep: int
    n_reward_values: int = 2
    seq_len: int = 256
    embed_dim: int = 64
    n_layers: int = 4
    n_heads: int = 4
    ff_dim: int = 2048
    attention_dropout: float = 0.5
    residual_dropout: float = 0.1
    embedding_dropout: float = 0.0
    recency_bias: bool = False
    token_layout: str = "triplet"

    def __post_init__(self) -> None:
        if self.token_layout not in TOKEN_LAYOUTS:
            raise ValueError(f"token_layout must be one of {TOKEN_LAYOUTS}, got {self.token_layout!r}")

    @property
    def tokens_per_transition(self) -> int:
        return 3 if self.token_layout == "triplet" else 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Block(nn.Module):
    """Pre-norm block: causal self-attention and a feed-forward layer, each with residual dropout."""

    def __init__(self, config: ADConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.attention_dropout = config.attention_dropout
        self.norm1 = nn.LayerNorm(config.embed_dim)
        self.qkv = nn.Linear(config.embed_dim, 3 * config.embed_dim)
        self.proj = nn.Linear(config.embed_dim, config.embed_dim)
        self.norm2 = nn.LayerNorm(config.embed_dim)
        width, hidden = config.embed_dim, config.ff_dim
        self.ff = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))
        self.dropout = nn.Dropout(config.residual_dropout)

    def forward(self, x: th.Tensor, mask: Optional[th.Tensor]) -> th.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2) for t in (q, k, v))
        dropout = self.attention_dropout if self.training else 0.0
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        else:
            mask = mask.to(q.dtype) if mask.is_floating_point() else mask  # bf16 autocast: match the queries
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        x = x + self.dropout(self.proj(y.transpose(1, 2).reshape(batch, length, width)))
        return x + self.dropout(self.ff(self.norm2(x)))


class ADTransformer(nn.Module):
    """
    :param config: the model's sizes
    """

    def __init__(self, config: ADConfig) -> None:
        super().__init__()
        if config.embed_dim % config.n_heads:
            raise ValueError(f"embed_dim {config.embed_dim} must be a multiple of n_heads {config.n_heads}")
        self.config = config
        d = config.embed_dim
        self.obs_embed = nn.Linear(config.obs_dim, d)
        # The one-token layout has one more action and reward category: "no previous transition".
        extra = int(config.token_layout == "transition")
        self.action_embed = nn.Embedding(config.n_actions + extra, d)
        categorical = config.n_reward_values > 0
        self.reward_embed: nn.Module = nn.Embedding(config.n_reward_values + extra, d) if categorical else nn.Linear(1, d)
        self.time_embed = nn.Embedding(config.max_timestep, d)
        # Which of a transition's three tokens a token is: only the seed's layout has three.
        self.kind_embed: Optional[nn.Parameter] = nn.Parameter(th.zeros(3, d)) if extra == 0 else None
        self.embed_dropout = nn.Dropout(config.embedding_dropout)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.n_actions)
        self.apply(self._init)
        for name, parameter in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("ff.2.weight"):
                # GPT-2's scaling of the residual projections keeps the stream's variance flat with depth.
                nn.init.normal_(parameter, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        observations: th.Tensor,
        actions: th.Tensor,
        rewards: th.Tensor,
        timesteps: th.Tensor,
        valid: Optional[th.Tensor] = None,
    ) -> th.Tensor:
        """
        :param observations: ``(B, L, obs_dim)`` float
        :param actions: ``(B, L)`` long
        :param rewards: ``(B, L)`` long category indices, or float when rewards are linear
        :param timesteps: ``(B, L)`` long step index inside the episode
        :param valid: ``(B, L)`` bool, False on left padding (None: all valid)
        :return: ``(B, L, n_actions)`` logits of ``a_t`` read at the token of ``o_t``
        """
        batch, length = actions.shape
        time = self.time_embed(timesteps.clamp(0, self.config.max_timestep - 1))
        per = self.config.tokens_per_transition
        if per == 1:
            tokens = self._transition_tokens(observations, actions, rewards, valid) + time
        else:
            assert self.kind_embed is not None
            tokens = th.stack(
                [
                    self.obs_embed(observations) + self.kind_embed[0],
                    self.action_embed(actions) + self.kind_embed[1],
                    self._embed_rewards(rewards) + self.kind_embed[2],
                ],
                dim=2,
            ) + time.unsqueeze(2)
        x = self.embed_dropout(tokens.reshape(batch, per * length, -1))
        mask = self._attention_mask(valid, per * length, x)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x[:, 0::per]))

    def _embed_rewards(self, rewards: th.Tensor) -> th.Tensor:
        if self.config.n_reward_values > 0:
            return self.reward_embed(rewards)
        return self.reward_embed(rewards.unsqueeze(-1).float())

    def _transition_tokens(
        self, observations: th.Tensor, actions: th.Tensor, rewards: th.Tensor, valid: Optional[th.Tensor]
    ) -> th.Tensor:
        """``o_t`` + ``a_{t-1}`` + ``r_{t-1}``, with the "none" categories where ``t - 1`` is not in the window."""
        none_action, none_reward = self.config.n_actions, self.config.n_reward_values
        has_previous = th.ones_like(actions, dtype=th.bool)
        has_previous[:, 0] = False
        if valid is not None:  # left padding: the first real transition has no previous one either
            has_previous[:, 1:] &= valid[:, :-1]
        previous_actions = th.roll(actions, 1, dims=1).masked_fill(~has_previous, none_action)
        previous_rewards = th.roll(rewards, 1, dims=1)
        if self.config.n_reward_values > 0:
            reward = self._embed_rewards(previous_rewards.masked_fill(~has_previous, none_reward))
        else:
            reward = self._embed_rewards(previous_rewards.masked_fill(~has_previous, 0))
        return self.obs_embed(observations) + self.action_embed(previous_actions) + reward

    def _attention_mask(self, valid: Optional[th.Tensor], n_tokens: int, x: th.Tensor) -> Optional[th.Tensor]:
        """None for plain causal attention; else a boolean or additive mask (``(B or 1, H or 1, T, T)``)."""
        padded = valid is not None and not bool(valid.all())
        if not padded and not self.config.recency_bias:
            return None
        allowed = th.ones(n_tokens, n_tokens, dtype=th.bool, device=x.device).tril()[None, None]
        if padded:
            assert valid is not None
            per = self.config.tokens_per_transition
            allowed = allowed & valid.repeat_interleave(per, dim=1)[:, None, None, :]
            # A padding query would see no key at all (NaN rows): let every token see itself.
            allowed = allowed | th.eye(n_tokens, dtype=th.bool, device=x.device)
        if not self.config.recency_bias:
            return allowed
        # ALiBi: head h subtracts slope_h x distance, so tokens can tell their own transition from
        # the same time step of earlier episodes; it depends on distances only, so padding changes nothing.
        index = th.arange(n_tokens, device=x.device)
        distance = (index[:, None] - index[None, :]).clamp(min=0).to(x.dtype)
        slopes = 2.0 ** (-8.0 * th.arange(1, self.config.n_heads + 1, device=x.device, dtype=x.dtype) / self.config.n_heads)
        bias = -slopes[:, None, None] * distance
        return bias[None].masked_fill(~allowed, float("-inf"))
