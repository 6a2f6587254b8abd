"""Exports to the formats other tools consume: Harbor task directories (:mod:`.harbor`),
trajectories as ATIF (:mod:`.atif`) and as OpenAI chat messages (:mod:`.openai_messages`)."""
