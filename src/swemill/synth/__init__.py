"""swemill.synth"""
