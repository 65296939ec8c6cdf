"""From a combo to an ordered target list (spec 03 §4): the strategies (pure, each
declaring its traits) and the planner that reads their state."""
