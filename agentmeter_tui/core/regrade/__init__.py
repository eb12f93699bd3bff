"""Regrades (issue 35): a trial's final workspace kept when it ends (:mod:`.keep`), and the task's
current verifier run on it again later, in a fresh sandbox of the same kind (:mod:`.regrade`)."""
