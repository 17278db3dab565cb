"""Parameter counts from the architecture fields (no published numbers are trusted blindly)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.specs import ModelSpec


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts of a model, split the way memory and FLOPs need them.

    ``embedding`` is the input embedding table, ``lm_head`` the output projection (0 when tied),
    ``attention`` and ``dense_mlp`` are summed over layers; ``expert`` is one routed expert's
    weights in one layer, ``num_moe_layers`` how many layers hold routed experts.
    """

    embedding: float
    lm_head: float
    attention: float
    dense_mlp: float
    routed_experts: float  # all routed experts, all layers
    shared_experts: float  # all shared experts, all layers
    router: float
    norms: float
    expert: float  # one routed expert in one layer
    num_moe_layers: int
    experts_per_token: int

    @property
    def total(self) -> float:
        return (
            self.embedding + self.lm_head + self.attention + self.dense_mlp
            + self.routed_experts + self.shared_experts + self.router + self.norms
        )

    @property
    def non_expert(self) -> float:
        """Everything but the routed experts (read in full every step)."""
        return self.total - self.routed_experts

    @property
    def active(self) -> float:
        """Parameters one token touches (embedding lookup included, as papers count it)."""
        return self.non_expert + self.num_moe_layers * self.experts_per_token * self.expert

    @property
    def active_matmul(self) -> float:
        """Parameters one token multiplies through (no embedding lookup, lm_head included)."""
        lm = self.lm_head if self.lm_head else self.embedding  # tied: the embedding is the lm_head
        return self.active - self.embedding - self.lm_head + lm

    @property
    def active_matmul_no_lm_head(self) -> float:
        return self.active - self.embedding - self.lm_head

    @property
    def lm_head_matmul(self) -> float:
        return self.lm_head if self.lm_head else self.embedding

    @property
    def quantizable(self) -> float:
        """Linear-layer weights that weight quantisation compresses (embeddings and lm_head stay 16-bit)."""
        return self.attention + self.dense_mlp + self.routed_experts + self.shared_experts


def count_params(m: ModelSpec) -> ParamCount:
    h = m.hidden_size
    a = m.attention
    mats = 3 if m.gated_mlp else 2
    if a.kind == "mla":
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (h * a.q_lora_rank + a.q_lora_rank * a.num_heads * qk_dim) if a.q_lora_rank else h * a.num_heads * qk_dim
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv_b = a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.value_dim)
        o = a.num_heads * a.value_dim * h
        attn_layer = q + kv_a + kv_b + o + a.kv_lora_rank + a.q_lora_rank  # latent norms
    else:
        q = h * a.num_heads * a.head_dim
        kv = h * a.num_kv_heads * a.head_dim + h * a.num_kv_heads * a.value_dim
        o = a.num_heads * a.value_dim * h
        attn_layer = q + kv + o
    attention = attn_layer * m.num_attention_layers
    # linear-attention layers: counted like attention projections (q, k, v, o of width hidden)
    attention += m.num_linear_layers * 4 * h * h
    embedding = m.vocab_size * h
    lm_head = 0 if m.tie_word_embeddings else m.vocab_size * h
    norms = (2 * m.num_layers + 1) * h
    if m.moe is None:
        return ParamCount(embedding, lm_head, attention, m.num_layers * mats * h * m.intermediate_size,
                          0, 0, 0, norms, 0, 0, 0)
    e = m.moe
    moe_layers = m.num_layers - e.num_dense_layers
    expert = mats * h * e.expert_intermediate_size
    return ParamCount(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        dense_mlp=e.num_dense_layers * mats * h * m.intermediate_size,
        routed_experts=moe_layers * e.num_experts * expert,
        shared_experts=moe_layers * e.num_shared_experts * mats * h * e.shared_expert_intermediate_size,
        router=moe_layers * h * e.num_experts,
        norms=norms,
        expert=expert,
        num_moe_layers=moe_layers,
        experts_per_token=e.experts_per_token,
    )
