"""A run's review: what follows its calls, one stage for `monitor probe --once` and the
daemon (docs/contract.md, "A run's review").

    stage.py    review_run: top-ups, evaluation, JSD window and shape, then one
                transaction that stores it all and ends the run; the Review it returns
    topup.py    the top-up's fresh triplets asked, batch by batch, resumable
    windows.py  the recent-runs JSD and the per-cycle shape against the baseline
    ports.py    what the review reads and writes in the store
"""

from monitor.review.ports import ReviewStore
from monitor.review.stage import Review, review_run
from monitor.review.topup import topup_run_id

__all__ = ["Review", "ReviewStore", "review_run", "topup_run_id"]
