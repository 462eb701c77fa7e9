"""A small transformer (embedding, one attention block, MLP, head) for the
warm-start test: Model(CONFIG), forward(ids) -> logits."""
import torch
from torch import nn

CONFIG = {"vocab": 64, "dim": 32, "heads": 4}


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["dim"]
        self.heads = cfg["heads"]
        self.emb = nn.Embedding(cfg["vocab"], d)
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, cfg["vocab"])

    def forward(self, ids):
        x = self.emb(ids)
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        a = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        x = x + self.mlp(x)
        return self.head(x)
