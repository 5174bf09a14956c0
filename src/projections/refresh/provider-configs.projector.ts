import type { RecordedEvent } from '../../domain/shared/event';
import { ProviderConfigEventType } from '../../domain/refresh/provider-configs';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText, textParam } from '../../infrastructure/postgres/jsonb-text';
import { Projector } from '../projector';
import { asProviderConfigEvent } from './refresh-event';

/**
 * `provider_configs`: one row per stored configuration. Each event is an
 * upsert or a delete of its own key, so applying a batch again in order ends
 * with the same rows.
 */
@Projector()
export class ProviderConfigsProjector implements Projector {
  readonly name = 'provider-configs';
  readonly handles = [
    ProviderConfigEventType.ProviderConfigured,
    ProviderConfigEventType.ProviderConfigRemoved,
  ];
  readonly tables = ['provider_configs'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    for (const recorded of events) {
      const event = asProviderConfigEvent(recorded);
      if (event === null) continue;
      const { state, source, alias } = event.data;
      switch (event.type) {
        case 'ProviderConfigured':
          await tx.query(
            `INSERT INTO provider_configs (state_name, source, alias, config, updated_at, updated_by)
             VALUES ($1, $2, $3, $4::jsonb, $5, $6)
             ON CONFLICT (state_name, source, alias) DO UPDATE SET config = EXCLUDED.config,
               updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by`,
            [
              textParam(state),
              textParam(source),
              textParam(alias ?? ''),
              jsonbText(event.data.config),
              recorded.metadata.occurredAt,
              textParam(recorded.metadata.actor),
            ],
          );
          break;
        case 'ProviderConfigRemoved':
          await tx.query(
            'DELETE FROM provider_configs WHERE state_name = $1 AND source = $2 AND alias = $3',
            [textParam(state), textParam(source), textParam(alias ?? '')],
          );
          break;
        default:
          break;
      }
    }
  }
}
