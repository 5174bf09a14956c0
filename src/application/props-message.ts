import { Command, Query } from '@nestjs/cqrs';

/**
 * Base class of a command that is a props object: named fields of plain
 * data, `new CommitStateCommand({ name, document, … })`, read as `c.name`.
 * Each call makes a class of its own, so the bus tells commands apart.
 */
export function CommandWith<P extends object, R>() {
  class PropsCommand extends Command<R> {
    constructor(props: P) {
      super();
      Object.assign(this, props);
    }
  }
  return PropsCommand as new (props: P) => Command<R> & Readonly<P>;
}

/** The same for a query. */
export function QueryWith<P extends object, R>() {
  class PropsQuery extends Query<R> {
    constructor(props: P) {
      super();
      Object.assign(this, props);
    }
  }
  return PropsQuery as new (props: P) => Query<R> & Readonly<P>;
}
