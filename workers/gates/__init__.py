"""The five gates. ``static`` and ``fitness`` run in the evaluating process on plain data;
``compile``, ``correctness`` and ``performance`` run inside the sandbox child."""
