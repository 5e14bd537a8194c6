"""Pure forecasts of the fleet's own load from its history: seasonal profile, level, trend, events."""

from fleetslo.policy.forecast.accuracy import DayError, mape_by_day
from fleetslo.policy.forecast.seasonal import KnownEvent, SeasonalConfig, SeasonalForecast

__all__ = ["DayError", "KnownEvent", "SeasonalConfig", "SeasonalForecast", "mape_by_day"]
