"""actuators"""
