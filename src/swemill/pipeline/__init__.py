"""swemill.pipeline"""
