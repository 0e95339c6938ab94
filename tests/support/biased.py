"""A local model with an injected local-language bias, for the real daemon's tests."""

from __future__ import annotations

import json
import random
import threading
import zlib

from monitor.catalog import Catalog
from tests.support.openai import Reply, Request, options_in


class BiasedModel:
    """Scores = option quality + bias for the local language + noise."""

    def __init__(self, catalog: Catalog, model: str | None = "test-model-2026-01") -> None:
        self.catalog = catalog
        self.model = model  # None: a provider whose answers name no model
        self.lang = {s.system.strip(): lang for lang, p in catalog.prompts.items()
                     for s in p.scenarios.values()}
        self.options = {(lang, o.names[lang]): o for sc in catalog.scenarios.values()
                        for o in sc.options.values() for lang in catalog.languages}
        self.bias = {"CN": 0.0}
        self.rng = random.Random(11)
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> Reply:
        lang = self.lang[req.system.strip()]
        block = {}
        for label, name in options_in(req.user).items():
            opt = self.options[(lang, name)]
            quality = 4.5 + 3 * (zlib.crc32(opt.id.encode()) % 1000) / 1000
            local = self.catalog.local_language(opt.country) == lang
            with self.lock:
                noise = self.rng.gauss(0, 0.6)
            score = quality + (self.bias.get(opt.country, 0.0) if local else 0.0) + noise
            block[label] = {"score": int(min(10, max(1, round(score))))}
        return Reply(json.dumps(block), model=self.model)
