"""The reviewer's side: agreed scores and blind review (reviewing.py), scores between
machines (scores_io.py), two trials side by side (compare.py)."""
