"""The study's inputs and the words they share: datasets, the Bloom levels and verb list, prompting
strategies and prompts, answer parsing, the chat types every text backend speaks, model files,
job resources, judge specs.
"""
