"""swemill.traces"""
