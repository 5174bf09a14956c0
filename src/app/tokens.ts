export const CONFIG = Symbol('Config');
export const LOGGER = Symbol('Logger');
export const DATABASE = Symbol('Database');
export const NOTIFIER = Symbol('Notifier');
