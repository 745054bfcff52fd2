//! Planner and cache keys: placeholder until the planner lands.
