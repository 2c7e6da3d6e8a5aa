/** The table a transactional step writes its effect to, in the store's database: one row per effect. */
export const EFFECTS_TABLE = "peers_effects";
