import { realAgentSuite } from '../helpers/real-agent-suite';
import { VENDORS, realTier } from '../helpers/real-tier';

/** The real-CLI tier (test/helpers/real-agent-suite.ts) for the model makers' own CLIs. */
realTier();
realAgentSuite(VENDORS);
