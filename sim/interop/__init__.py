"""Real software in the loop: stock recursive resolvers, zone export and AXFR."""
