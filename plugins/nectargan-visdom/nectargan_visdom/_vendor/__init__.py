"""Third-party code shipped inside nectargan-visdom: visdom 0.2.4 and its page's browser assets (see README.md)."""
